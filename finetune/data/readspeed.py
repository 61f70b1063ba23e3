"""How fast a prepared .rec is read and decoded the way training reads it (MXNet's --test-io)."""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass
from pathlib import Path

from finetune.data import manifest as mf
from finetune.data.imaging import _own_pixel_limit
from finetune.data.recordio import RecordReader, unpack_header
from finetune.data.verify import check_dataset
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
    # sizes, sha256 (cached), every record's framing and label: a damaged .rec/.idx makes
    # MXNet's reader abort or segfault, so it sees only files that passed
    check_dataset(dataset, m)
    mx = require_module("mxnet")
    args = (split, threads, batch_size, data_shape, max_images, warmup_batches)
    try:
        return _measure(mx, Path(dataset), m, *args)
    except mx.base.MXNetError as exc:
        raise _decode_failure(dataset, m, split, exc) from None


def _measure(mx, dataset, m, split, threads, batch_size, data_shape, max_images, warmup_batches):
    """One timed pass with mx.io.ImageRecordIter (see measure)."""
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


def _decode_failure(dataset: Path, m: mf.DatasetManifest, split: str, exc) -> DataError:
    """What MXNet could not read, named: the first record whose image does not decode (MXNet
    says only that OpenCV failed somewhere). test-io measures a pass over every image, so it
    stops at a bad one rather than skipping it: its figure would not be that pass's."""
    rec = Path(dataset) / m.file_name(split, "rec")
    bad = first_undecodable(rec, rec.with_suffix(".idx"))
    fix = (
        "re-create the dataset with `finetune prepare --overwrite` (prepare skips and lists "
        "images that do not decode; this one was damaged after it)."
    )
    if bad is None:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return DataError(f"MXNet could not read {rec}: {first}", fix)
    return DataError(f"{rec}: {bad}", fix)


def first_undecodable(rec: Path, idx: Path) -> str | None:
    """'record N (key K, id I) does not decode: REASON' for the first record in .idx order
    whose image Pillow cannot decode; None when every one decodes."""
    from PIL import Image, UnidentifiedImageError

    with RecordReader(rec, idx) as reader, _own_pixel_limit():
        for number, key in enumerate(reader.keys):
            header, payload = unpack_header(reader.read_key(key))
            try:
                with Image.open(io.BytesIO(payload)) as im:
                    im.load()
            except UnidentifiedImageError:  # (its text holds a BytesIO's repr: not shown)
                reason = "not a readable image (unknown or corrupt format)"
            except Exception as exc:  # Pillow raises OSError, ValueError, SyntaxError ...
                reason = f"corrupt image: {exc or type(exc).__name__}"
            else:
                continue
            return f"record {number} (key {key}, id {header.id}) does not decode: {reason}"
    return None
