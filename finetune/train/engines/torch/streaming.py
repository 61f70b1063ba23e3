"""Images decoded every epoch by loader worker processes, for splits too large to keep.

Each worker opens the .rec itself (our RecordIO reader) and applies the preprocessing
contract's reference implementation (Pillow: decode, shorter-side resize, crop, flip,
normalise), drawing a sample's crop and flip from a generator seeded by (seed, epoch, record):
what a record becomes does not depend on which worker takes it, so runs repeat and resume
exactly. Batches arrive in pinned memory, prefetched.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from finetune.data.recordio import RecordReader, read_index, unpack_header
from finetune.train.engines.torch.augment import Augment, image_seed
from finetune.train.engines.torch.resident import pil_decode
from finetune.train.preprocess import Preprocessing

PREFETCH = 4  # batches per worker queued ahead


class RecordDataset(torch.utils.data.Dataset):
    """Records of one split; an item is (record, epoch) -> (tensor, label)."""

    def __init__(self, rec: Path, idx: Path, contract: Preprocessing, train: bool, seed: int,
                 augment: Augment | None = None):  # fmt: skip
        self.rec, self.idx = Path(rec), Path(idx)
        self.keys = list(read_index(idx, self.rec.stat().st_size))
        self.contract, self.train, self.seed = contract, train, seed
        self.augment = augment  # training only: per-image presets after the crop
        self._reader: RecordReader | None = None  # opened in each worker process

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, item: tuple[int, int]):
        record, epoch = item
        if self._reader is None:
            self._reader = RecordReader(self.rec, self.idx)
        header, payload = unpack_header(self._reader.read_key(self.keys[record]))
        label = int(header.label if header.flag == 0 else header.label[0])
        image = pil_decode(payload, f"{self.rec}: record {record} (key {self.keys[record]})")
        if not self.train:
            return torch.from_numpy(self.contract.val_array(image)), label
        rng = np.random.default_rng([self.seed, epoch, record])
        if self.augment is None:
            return torch.from_numpy(self.contract.train_array(image, rng)), label
        seed = image_seed(self.seed, epoch, record)
        array = self.contract.train_array(image, rng, lambda crop: self.augment.pil(crop, seed))
        return self.augment.erase(torch.from_numpy(array), seed), label


def loader(dataset: RecordDataset, batches: list[list[int]], epoch: int, workers: int, pin: bool):
    """A DataLoader over the given batches (lists of record numbers) of ``epoch``."""
    items = [[(r, epoch) for r in batch] for batch in batches]
    return torch.utils.data.DataLoader(
        dataset,
        batch_sampler=items,
        num_workers=workers,
        pin_memory=pin,
        prefetch_factor=PREFETCH if workers > 0 else None,
        persistent_workers=False,
    )
