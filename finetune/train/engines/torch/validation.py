"""The validation transform of the torch engine, batch by batch: one code path for the
validation pass of training and for `finetune predict`, so a model's predictions on its own
validation images are the ones training counted.

``resident``: every image decoded and resized once onto the device (ImageStore), centre
crops gathered there. ``stream``: loader workers apply the Pillow reference. The two agree to
a grey level or so; the run records which one it used (``engine.json`` in the model folder),
and prediction uses the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from finetune.train.engines.torch import boxes, streaming
from finetune.train.engines.torch.resident import ImageStore
from finetune.train.preprocess import Preprocessing

EVAL_BATCH = 256  # images per forward pass (the batch changes CPU kernels' rounding)


def normalize(pixels: torch.Tensor, contract: Preprocessing) -> torch.Tensor:
    """0-255 RGB pixels (B, 3, H, W) -> (pixel - mean) / std."""
    mean = torch.tensor(contract.mean, device=pixels.device).view(1, 3, 1, 1)
    std = torch.tensor(contract.std, device=pixels.device).view(1, 3, 1, 1)
    return (pixels - mean) / std


def resident_batches(
    store: ImageStore, contract: Preprocessing, records: list[int] | None = None
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(images, labels) of ``records`` of ``store`` (default: all, in record order): centre
    crops, normalised, NHWC."""
    size, device = contract.image_size, store.pixels.device
    chosen = torch.arange(len(store)) if records is None else torch.tensor(records)
    for start in range(0, len(chosen), EVAL_BATCH):
        index = chosen[start : start + EVAL_BATCH].to(device)
        w, h = store.widths[index].cpu(), store.heights[index].cpu()
        box = boxes.center(w, h, size)
        flip = torch.zeros(len(index), dtype=torch.bool)
        x = normalize(store.crops(index, box, size, flip), contract)
        yield x.contiguous(memory_format=torch.channels_last), store.labels[index]


def stream_batches(
    rec: Path,
    idx: Path,
    contract: Preprocessing,
    device: torch.device,
    workers: int,
    seed: int,
    records: list[int] | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(images, labels) of ``records`` of a split (default: all, in record order), decoded
    by ``workers`` processes."""
    data = streaming.RecordDataset(rec, idx, contract, False, seed)
    order = list(range(len(data))) if records is None else list(records)
    batches = [order[i : i + EVAL_BATCH] for i in range(0, len(order), EVAL_BATCH)]
    for x, y in streaming.loader(data, batches, 0, workers, device.type == "cuda"):
        x = x.to(device, non_blocking=True)
        yield x.contiguous(memory_format=torch.channels_last), y
