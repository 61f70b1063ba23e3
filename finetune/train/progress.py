"""Where a run stands (saved in every checkpoint) and the stopwatch behind its throughput.

Engine-neutral: both engines keep a :class:`Progress` and hand it to the epoch loop
(finetune.train.fitloop), which checkpoints it, resumes from it and reports from it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields


@dataclass
class Progress:
    """Where the run stands. ``batch`` is the next batch of ``epoch`` to train; when it equals
    the steps per epoch, validation is next. The tallies cover this epoch so far, across
    restarts; ``events`` holds every finished epoch's metrics; ``best_*`` name the epoch with
    the best validation accuracy so far and the checkpoint that holds its weights."""

    epoch: int = 0
    batch: int = 0
    step: int = 0  # optimizer steps over the whole run: the lr schedule's position
    samples: int = 0  # training images of this epoch
    seen: int = 0  # images behind loss_sum and hits
    loss_sum: float = 0.0
    hits: int = 0
    seconds: float = 0.0  # wall time of this epoch spent by earlier processes
    timed_samples: int = 0  # images and seconds after each process's warm-up batches
    timed_seconds: float = 0.0
    events: list[dict] = field(default_factory=list)
    best_epoch: int | None = None
    best_val_acc: float | None = None
    best_checkpoint: str | None = None

    def to_state(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> Progress:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in state.items() if k in names})

    def improves(self, val_acc: float) -> bool:
        """Whether ``val_acc`` beats the best so far (ties keep the earlier epoch)."""
        return self.best_val_acc is None or val_acc > self.best_val_acc

    def next_epoch(self, event: dict) -> None:
        """Record a finished epoch and reset the per-epoch tallies."""
        self.events.append(event)
        keep = {"epoch": self.epoch + 1, "step": self.step, "events": self.events}
        keep.update(
            best_epoch=self.best_epoch,
            best_val_acc=self.best_val_acc,
            best_checkpoint=self.best_checkpoint,
        )
        fresh = Progress(**keep)
        for f in fields(self):  # in place: the epoch's tally holds this object
            setattr(self, f.name, getattr(fresh, f.name))


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
