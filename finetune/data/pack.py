"""Encode many images in parallel into one scratch file, in input order.

Workers (processes) read and encode; the parent appends results to a scratch file in the
order of the inputs, so the bytes are the same for any number of workers. Records are later
copied from the scratch file into the split .rec files once the split is known (a corrupt
image must not take a training slot).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from finetune.data.imaging import Encoded, ImageOptions, encode


@dataclass(frozen=True)
class Slot:
    """Where an encoded image sits in the scratch file, or why it is not there."""

    offset: int
    length: int
    reason: str | None = None
    size: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


_ROOT: Path | None = None
_OPTS: ImageOptions | None = None


def _init(root: Path, opts: ImageOptions) -> None:
    global _ROOT, _OPTS
    _ROOT, _OPTS = root, opts


def _work(rel: str) -> Encoded:
    assert _ROOT is not None and _OPTS is not None
    try:
        with open(_ROOT / rel, "rb") as f:
            data = f.read()
    except OSError as exc:
        return Encoded(None, f"unreadable: {exc.strerror or exc}")
    return encode(data, _OPTS)


def default_workers() -> int:
    """One worker per CPU this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def encode_iter(root: Path, rels: list[str], opts: ImageOptions, workers: int) -> Iterator[Encoded]:
    """Yield the encoding of each relative path, in order, using ``workers`` processes."""
    if workers <= 1 or len(rels) < 2:
        _init(root, opts)
        yield from map(_work, rels)
        return
    # fork: workers start in milliseconds and inherit nothing heavy (no MXNet is imported here).
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    chunk = max(1, min(16, len(rels) // (workers * 8) or 1))
    with ctx.Pool(workers, initializer=_init, initargs=(root, opts)) as pool:
        yield from pool.imap(_work, rels, chunksize=chunk)


def encode_to_scratch(
    root: Path,
    rels: list[str],
    opts: ImageOptions,
    scratch: Path,
    workers: int,
    advance: Callable[[int], None] | None = None,
) -> list[Slot]:
    """Encode every path into ``scratch``; returns one Slot per path, in order."""
    slots: list[Slot] = []
    offset = 0
    with open(scratch, "wb") as out:
        for result in encode_iter(root, rels, opts, workers):
            if result.data is None:
                slots.append(Slot(offset, 0, result.reason))
            else:
                out.write(result.data)
                slots.append(Slot(offset, len(result.data), None, result.size))
                offset += len(result.data)
            if advance:
                advance(1)
    return slots
