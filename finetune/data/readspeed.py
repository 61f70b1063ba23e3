"""How fast a prepared .rec is read and decoded the way training reads it (MXNet's --test-io)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from finetune.data import manifest as mf
from finetune.errors import DataError, require_module


@dataclass(frozen=True)
class ReadSpeed:
    split: str
    images: int
    seconds: float
    threads: int  # decode threads MXNet really runs (it caps what it is asked for)
    batch_size: int
    asked_threads: int = 0
    asked_batch_size: int = 0

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds if self.seconds else 0.0


def default_threads() -> int:
    return max(1, os.cpu_count() or 1)


def decode_threads(asked: int) -> int:
    """Threads ImageRecordIter decodes with: at most max(cores / 2 - 1, 1), whatever it is
    asked for (measured: 1 on 2 cores)."""
    return max(1, min(asked, max((os.cpu_count() or 1) // 2 - 1, 1)))


def fitting_batch(asked: int, images: int, warmup_batches: int) -> int:
    """``asked``, or smaller so the split gives the warm-up batches and one timed batch."""
    return max(1, min(asked, images // (warmup_batches + 1)))


def measure(
    dataset: Path,
    split: str = "train",
    threads: int = 0,
    batch_size: int = 32,
    data_shape: int = 224,
    max_images: int = 0,
    warmup_batches: int = 2,
) -> ReadSpeed:
    """Read one pass of ``split`` with mx.io.ImageRecordIter (random crop + mirror, as in
    training) and time it after ``warmup_batches`` batches."""
    m = mf.load(dataset)
    if split not in m.splits:
        raise DataError(f"split {split!r} is not in {dataset}", f"use one of {sorted(m.splits)}.")
    mx = require_module("mxnet")
    rec = Path(dataset) / m.file_name(split, "rec")
    asked_threads, asked_batch = threads or default_threads(), batch_size
    threads = decode_threads(asked_threads)
    batch_size = fitting_batch(batch_size, m.splits[split].count, warmup_batches)
    it = mx.io.ImageRecordIter(
        path_imgrec=str(rec),
        path_imgidx=str(rec.with_suffix(".idx")),
        data_shape=(3, data_shape, data_shape),
        batch_size=batch_size,
        rand_crop=True,
        rand_mirror=True,
        shuffle=split == "train",
        preprocess_threads=asked_threads,
        prefetch_buffer=4,
        round_batch=False,
    )
    images = 0
    start = None
    for i, batch in enumerate(it):
        if i == warmup_batches:
            start = time.perf_counter()
        if start is not None:
            images += batch.data[0].shape[0] - batch.pad
            batch.data[0].wait_to_read()
        if max_images and images >= max_images:
            break
    if start is None:
        raise DataError(
            f"{rec} holds too few images to time ({warmup_batches} warm-up batches needed)",
            "prepare more images for this split.",
        )
    seconds = time.perf_counter() - start
    return ReadSpeed(split, images, seconds, threads, batch_size, asked_threads, asked_batch)
