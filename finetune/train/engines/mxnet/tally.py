"""Book-keeping of a run: where it stands (saved in checkpoints) and what an epoch measured.

Losses and hits stay on the devices and are read back one batch late: the Python loop queues
batch i+1 before it waits for batch i, so the devices do not idle while the host prepares the
next batch, and the loop never runs more than one batch ahead (SIGTERM is seen promptly).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass, field, fields

import mxnet as mx


@dataclass
class Progress:
    """Where the run stands. ``batch`` is the next batch of ``epoch`` to train; when it equals
    the steps per epoch, validation is next. The tallies cover this epoch so far, across
    restarts, and ``events`` holds every finished epoch's metrics."""

    epoch: int = 0
    batch: int = 0
    step: int = 0  # optimizer steps over the whole run: the lr schedule's position
    samples: int = 0  # training images of this epoch (padding excluded)
    seen: int = 0  # images behind loss_sum and hits (the wrapped-around padding included)
    loss_sum: float = 0.0
    hits: int = 0
    seconds: float = 0.0  # wall time of this epoch spent by earlier processes
    timed_samples: int = 0  # images and seconds after each process's warm-up batches
    timed_seconds: float = 0.0
    events: list[dict] = field(default_factory=list)

    def to_state(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> Progress:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in state.items() if k in names})

    def next_epoch(self, event: dict) -> None:
        """Record a finished epoch and reset the per-epoch tallies."""
        self.events.append(event)
        fresh = Progress(epoch=self.epoch + 1, step=self.step, events=self.events)
        for f in fields(self):  # in place: the epoch's Tally holds this object
            setattr(self, f.name, getattr(fresh, f.name))


class Tally:
    """Adds each batch's loss sum and hit count into ``progress``, one batch late."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self._pending: deque = deque()

    def add(self, losses: list, outputs: list, labels: list) -> None:
        """Queue one batch (lists of per-device NDArrays); read back the one before."""
        loss_sums = [loss.sum() for loss in losses]
        hits = [(out.argmax(axis=1) == lab).sum() for out, lab in zip(outputs, labels, strict=True)]
        seen = sum(lab.shape[0] for lab in labels)
        self._pending.append((loss_sums, hits, seen))
        while len(self._pending) > 1:
            self._read_oldest()

    def sync(self) -> None:
        """Read everything back and wait for all queued work (backward, update) to finish."""
        while self._pending:
            self._read_oldest()
        mx.nd.waitall()

    def _read_oldest(self) -> None:
        loss_sums, hits, seen = self._pending.popleft()
        self.progress.loss_sum += sum(x.asscalar() for x in loss_sums)
        self.progress.hits += int(sum(x.asscalar() for x in hits))
        self.progress.seen += seen


class Stopwatch:
    """Seconds of steady-state training: started after the warm-up batches, with the time
    spent writing checkpoints taken out."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.excluded = 0.0

    def start(self) -> None:
        self.started = time.monotonic()

    def exclude(self, seconds: float) -> None:
        if self.started is not None:
            self.excluded += seconds

    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return time.monotonic() - self.started - self.excluded
