"""The validation transform of the torch engine, batch by batch: one code path for the
validation pass of training and for `finetune predict`, so a model's predictions on its own
validation images are the ones training counted.

``resident``: every image decoded and resized once onto the device (ImageStore), centre
crops gathered there. ``stream``: loader workers apply the Pillow reference up to the uint8
crop, the device normalises (:func:`to_input`). The two agree to
a grey level or so; the run records which one it used (``engine.json`` in the model folder),
and prediction uses the same.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import torch

from finetune.train.engines.torch import boxes, streaming
from finetune.train.engines.torch.resident import ImageStore
from finetune.train.preprocess import Preprocessing

EVAL_BATCH = 256  # images per forward pass (the batch changes CPU kernels' rounding)


@functools.lru_cache(maxsize=16)
def _mean_std(mean: tuple, std: tuple, device: torch.device):
    """The contract's mean and std on ``device``, made once: a tensor built from a list is
    copied from pageable memory with a blocking copy, which waits for the device's queue --
    once per step it would stop the host from running ahead."""
    return torch.tensor(mean, device=device), torch.tensor(std, device=device)


def normalize(pixels: torch.Tensor, contract: Preprocessing) -> torch.Tensor:
    """0-255 RGB pixels (B, 3, H, W) -> (pixel - mean) / std."""
    mean, std = _mean_std(tuple(contract.mean), tuple(contract.std), pixels.device)
    return (pixels - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)


def to_input(
    pixels: torch.Tensor, contract: Preprocessing, dtype=torch.float32, layout=torch.channels_last
) -> torch.Tensor:
    """uint8 HWC pixels (B, H, W, 3) on the device -> the network's input (B, 3, H, W),
    normalised in float32 as :meth:`Preprocessing.normalize` does (the same values), then
    ``dtype``, in ``layout`` (the run's: hardware.memory_format): channels_last is a view of
    the HWC result, NCHW a copy."""
    mean, std = _mean_std(tuple(contract.mean), tuple(contract.std), pixels.device)
    x = (pixels.to(torch.float32) - mean) / std
    return x.to(dtype).permute(0, 3, 1, 2).contiguous(memory_format=layout)


def resident_batches(
    store: ImageStore, contract: Preprocessing, records: list[int] | None = None,
    dtype=torch.float32, layout=torch.channels_last,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
    """(images, labels) of ``records`` of ``store`` (default: all, in record order): centre
    crops, normalised, in ``layout`` (to_input); the boxes drawn from the host's copy of the
    sizes."""
    size, device = contract.image_size, store.pixels.device
    chosen = torch.arange(len(store)) if records is None else torch.tensor(records)
    for start in range(0, len(chosen), EVAL_BATCH):
        index = chosen[start : start + EVAL_BATCH]
        box = boxes.center(*store.host_sizes(index), size)
        flip = torch.zeros(len(index), dtype=torch.bool)
        labels = store.labels[index.to(device, non_blocking=True)]
        if store.exact(index, box, size):
            pixels = store.copies(index, box, size, flip)
            yield to_input(pixels, contract, dtype, layout), labels
            continue
        x = normalize(store.crops(index, box, size, flip), contract).to(dtype)
        yield x.contiguous(memory_format=layout), labels


def stream_batches(
    rec: Path,
    idx: Path,
    contract: Preprocessing,
    device: torch.device,
    workers: int,
    seed: int,
    records: list[int] | None = None,
    feed: streaming.Feed | None = None,
    layout=torch.channels_last,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(images, labels) of ``records`` of a split (default: all, in record order), decoded
    by ``workers`` processes (those of ``feed`` when given: a run's split keeps its own), in
    ``layout`` (to_input)."""
    if feed is None:
        data = streaming.RecordDataset(rec, idx, contract, False, seed)
        feed = streaming.Feed(data, workers, device.type == "cuda", keep=False)
    count = len(feed.dataset)
    order = list(range(count)) if records is None else list(records)
    batches = [order[i : i + EVAL_BATCH] for i in range(0, len(order), EVAL_BATCH)]
    for x, y in feed.epoch(batches, 0):
        yield to_input(x.to(device, non_blocking=True), contract, layout=layout), y
