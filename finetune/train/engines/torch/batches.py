"""The session's data, resident or streaming, behind one interface chosen once at build:
``batches(epoch, position)`` (this process's training batches of an epoch, from a position
on) and ``eval_batches(split, records)`` (a split's validation batches, file order).

Both cut an epoch the same way: a permutation seeded by (seed, epoch), in full global batches
(at most ``steps``), each process keeping its slice of every global batch. ``resident`` keeps
the decoded images on the device and crops them there, drawing boxes and flips for the whole
global batch from a generator seeded by (seed, epoch, position), on the host (its copy of the
image sizes: no device-to-host copy per step); ``stream`` has loader worker processes apply
the Pillow reference, shipping uint8. Either way a run resumed at any position draws what the
uninterrupted run drew, and on a GPU the next batch is prepared on a side stream while the
current one trains (finetune.train.engines.torch.prefetch); ``input_dtype`` (bf16 when the
run trains in bf16 on a GPU) is what the network receives.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import torch

from finetune.engines.torch import TorchOptions
from finetune.train import dataset
from finetune.train.engines.torch import (
    augment,
    boxes,
    ddp,
    hardware,
    prefetch,
    streaming,
    validation,
)
from finetune.train.engines.torch.resident import ImageStore
from finetune.train.preprocess import Preprocessing

RESIDENT_SHARE = 0.5  # auto: resident when decoded images take at most this much memory

Batch = tuple[torch.Tensor, torch.Tensor]
log = logging.getLogger(__name__)


class _Batches:
    """What both data paths share: the epoch's order and this process's slice of it."""

    path = ""
    loader = False  # whether a batch comes from loader workers (else computed in the step)

    def __init__(self, files: dataset.DatasetFiles, contract: Preprocessing,
                 device: torch.device, hp, group: ddp.Group, steps: int,
                 layout: torch.memory_format) -> None:  # fmt: skip
        self.files, self.contract, self.device = files, contract, device
        self.layout = layout  # the run's (hardware.memory_format), as its network has
        self.hp, self.group, self.steps = hp, group, steps
        self.local_batch = ddp.local_batch(hp.global_batch, group.world)
        self.workers = hardware.loader_workers(TorchOptions.of(hp).loader_workers)
        self.augment = augment.from_hparams(hp)  # per-image presets (None: off)
        self.input_dtype = torch.float32  # the session sets bf16 for bf16 on a GPU

    def order(self, epoch: int) -> list[torch.Tensor]:
        """The epoch's global batches of record numbers (a permutation seeded by (seed,
        epoch), cut in full batches; a split smaller than one batch repeats to fill it)."""
        count = self.files.train_count
        order = torch.randperm(count, generator=boxes.generator(self.hp.seed, epoch))
        b = self.local_batch * self.group.world  # the global batch
        if count < b:
            order = order.repeat(b // count + 1)
        return [order[i * b : (i + 1) * b] for i in range(max(1, count // b))][: self.steps]

    def mine(self) -> slice:
        """This process's part of a global batch."""
        b, rank = self.local_batch, self.group.rank
        return slice(rank * b, (rank + 1) * b)

    def close(self) -> None:
        """End what the data path started (worker processes)."""

    def split(self, split: str):
        f = self.files
        return (f.val_rec, f.val_idx) if split == "val" else (f.test_rec, f.test_idx)


class ResidentBatches(_Batches):
    """Every split decoded once onto the device; crops gathered there."""

    path = "resident"

    def __init__(self, *args) -> None:
        super().__init__(*args)
        f = self.files
        self.train = ImageStore.load(f.train_rec, f.train_idx, self.contract, self.device)
        self._eval: dict[str, ImageStore] = {}

    def batches(self, epoch: int, position: int = 0) -> Iterator[Batch]:
        """(x, y) of this process for the epoch's batches from ``position`` on."""
        return prefetch.ahead(self._batches(epoch, position), self.device)

    def _batches(self, epoch: int, position: int) -> Iterator[Batch]:
        store, mine, size = self.train, self.mine(), self.contract.image_size
        for at, index in enumerate(self.order(epoch)[position:], position):
            g = boxes.generator(self.hp.seed, epoch, at)
            w, h = store.host_sizes(index)
            box = boxes.train(w, h, self.contract, g)[mine]  # drawn for the global batch
            flip = boxes.flips(len(index), self.contract, g)[mine]
            index = index[mine]
            labels = store.labels[index.to(self.device, non_blocking=True)]
            if store.exact(index, box, size):
                pixels = store.copies(index, box, size, flip)
                if self.augment is None:  # the common case: one gather, one normalising pass
                    x = validation.to_input(pixels, self.contract, self.input_dtype, self.layout)
                    yield x, labels
                    continue
                pixels = pixels.permute(0, 3, 1, 2).to(torch.float32)
            else:
                pixels = store.crops(index, box, size, flip)
            x = self._augmented(pixels, epoch, at, mine).to(self.input_dtype)
            yield x.contiguous(memory_format=self.layout), labels

    def _augmented(self, pixels: torch.Tensor, epoch: int, at: int, mine: slice):
        """Normalised crops, each augmented by its place in the global batch when asked."""
        if self.augment is None:
            return validation.normalize(pixels, self.contract)
        seeds = [augment.image_seed(self.hp.seed, epoch, at, j)
                 for j in range(mine.start, mine.stop)]  # fmt: skip
        return self.augment.batch(pixels, seeds, lambda p: validation.normalize(p, self.contract))

    def eval_batches(self, split: str, records: list[int] | None = None) -> Iterator[Batch]:
        """(x, y) batches of ``records`` of ``split`` (default: all, in file order)."""
        if split not in self._eval:
            rec, idx = self.split(split)
            self._eval[split] = ImageStore.load(rec, idx, self.contract, self.device)
        store = self._eval[split]
        return validation.resident_batches(store, self.contract, records, self.input_dtype,
                                           self.layout)  # fmt: skip


class StreamBatches(_Batches):
    """Images decoded every epoch by loader worker processes."""

    path = "stream"
    loader = True

    def __init__(self, *args) -> None:
        super().__init__(*args)
        f = self.files
        self.train = streaming.RecordDataset(
            f.train_rec, f.train_idx, self.contract, True, self.hp.seed, self.augment
        )
        self.pin = self.device.type == "cuda"
        self.feed = streaming.Feed(self.train, self.workers, self.pin)  # workers for the run
        self._eval: dict[str, streaming.Feed] = {}

    def batches(self, epoch: int, position: int = 0) -> Iterator[Batch]:
        """(x, y) of this process for the epoch's batches from ``position`` on."""
        return prefetch.ahead(self._batches(epoch, position), self.device)

    def _batches(self, epoch: int, position: int) -> Iterator[Batch]:
        mine = self.mine()
        rest = [b[mine].tolist() for b in self.order(epoch)[position:]]
        for x, y in self.feed.epoch(rest, epoch):
            x = x.to(self.device, non_blocking=True)  # (on the side stream: off the compute)
            y = y.to(self.device, non_blocking=True)
            if x.dtype == torch.uint8:  # HWC pixels: normalised here
                yield validation.to_input(x, self.contract, self.input_dtype, self.layout), y
            else:  # augmented in the workers: already normalised
                yield x.to(self.input_dtype).contiguous(memory_format=self.layout), y

    def close(self) -> None:
        for feed in (self.feed, *self._eval.values()):
            feed.close()

    def eval_batches(self, split: str, records: list[int] | None = None) -> Iterator[Batch]:
        """(x, y) batches of ``records`` of ``split`` (default: all, in file order), from
        the split's own workers (kept for the run)."""
        rec, idx = self.split(split)
        if split not in self._eval:
            data = streaming.RecordDataset(rec, idx, self.contract, False, self.hp.seed)
            self._eval[split] = streaming.Feed(data, self.workers, self.pin)
        return validation.stream_batches(rec, idx, self.contract, self.device, self.workers,
                                         self.hp.seed, records, self._eval[split],
                                         self.layout)  # fmt: skip


def open_batches(files, contract: Preprocessing, device: torch.device, hp, group, steps: int,
                 layout: torch.memory_format):  # fmt: skip
    """The run's data path (TorchOptions' ``data_path``; ``auto``: resident when the decoded
    images take at most RESIDENT_SHARE of the device's free memory), its training split loaded,
    its batches in ``layout``."""
    path = TorchOptions.of(hp).data_path
    if path == "auto":
        need, have = hardware.decoded_bytes(files, contract), hardware.memory(device)
        path = "resident" if need <= RESIDENT_SHARE * have else "stream"
        log.info("data path %s: decoded images ~%.2f GB, %s memory %.1f GB",
                 path, need / 1e9, device.type, have / 1e9)  # fmt: skip
    if group.local_rank == 0:
        print(f"finetune-data path={path} device={device.type}", flush=True)
    kind = ResidentBatches if path == "resident" else StreamBatches
    return kind(files, contract, device, hp, group, steps, layout)
