"""Images decoded every epoch by loader worker processes, for splits too large to keep.

Each worker opens the .rec itself (our RecordIO reader) and applies the preprocessing
contract's reference implementation (Pillow: decode, shorter-side resize, crop, flip),
drawing a sample's crop and flip from a generator seeded by (seed, epoch, record):
what a record becomes does not depend on which worker takes it, so runs repeat and resume
exactly. Without per-image augmentation a worker ships uint8 HWC pixels and the device
normalises them (finetune.train.engines.torch.validation.to_input: the reference's own float32
arithmetic); with it, the normalised float32 tensor (random erasing works on that). Batches
arrive in pinned memory, prefetched, from workers that live as long as the loader.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from finetune.data.recordio import RecordReader, read_index, unpack_header
from finetune.train.engines.torch.augment import Augment, image_seed
from finetune.train.engines.torch.resident import pil_decode
from finetune.train.preprocess import Preprocessing, raw

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
        label = header.class_label
        image = pil_decode(payload, f"{self.rec}: record {record} (key {self.keys[record]})")
        if not self.train:
            return torch.from_numpy(self.contract.val_array(image, raw)), label
        rng = np.random.default_rng([self.seed, epoch, record])
        if self.augment is None:
            return torch.from_numpy(self.contract.train_array(image, rng, finish=raw)), label
        seed = image_seed(self.seed, epoch, record)
        array = self.contract.train_array(image, rng, lambda crop: self.augment.pil(crop, seed))
        return self.augment.erase(torch.from_numpy(array), seed), label


class Feed:
    """One DataLoader whose worker processes live across epochs (and validation passes):
    :meth:`epoch` sets the batches (lists of record numbers) of the next pass."""

    def __init__(self, dataset: RecordDataset, workers: int, pin: bool, keep: bool = True):
        self._items: list[list[tuple[int, int]]] = []
        self.dataset = dataset
        self.loader = torch.utils.data.DataLoader(
            dataset,
            batch_sampler=self,
            num_workers=workers,
            pin_memory=pin,
            prefetch_factor=PREFETCH if workers > 0 else None,
            persistent_workers=keep and workers > 0,
        )

    def __iter__(self):  # the batch sampler: read again at every pass
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def close(self) -> None:
        """End the workers now (kept workers would otherwise live until the loader is
        garbage-collected: a run's end, or its failure, must not leave processes behind)."""
        running = getattr(self.loader, "_iterator", None)
        if running is not None:
            running._shutdown_workers()
            self.loader._iterator = None

    def epoch(self, batches: list[list[int]], epoch: int):
        """An iterator over ``batches`` of ``epoch`` (one pass at a time)."""
        self._items = [[(r, epoch) for r in batch] for batch in batches]
        return iter(self.loader)


def loader(dataset: RecordDataset, batches: list[list[int]], epoch: int, workers: int, pin: bool):
    """One pass over the given batches (lists of record numbers) of ``epoch`` with workers
    of its own (benchmarks, one-off passes; a run keeps a :class:`Feed`)."""
    return Feed(dataset, workers, pin, keep=False).epoch(batches, epoch)
