"""Where a run stands (saved in every checkpoint) and the stopwatch behind its throughput.

Engine-neutral: both engines keep a :class:`Progress` and hand it to the epoch loop
(finetune.train.fitloop), which checkpoints it, resumes from it and reports from it.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, fields

from finetune.contracts import metrics
from finetune.errors import ConfigError


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
        fresh = Progress(
            epoch=self.epoch + 1,
            step=self.step,
            events=self.events,
            best_epoch=self.best_epoch,
            best_val_acc=self.best_val_acc,
            best_checkpoint=self.best_checkpoint,
        )
        for f in fields(self):  # in place: the epoch's tally holds this object
            setattr(self, f.name, getattr(fresh, f.name))

    @property
    def rate(self) -> float:
        """This host's images per second after the warm-up batches (0 before any)."""
        return self.timed_samples / self.timed_seconds if self.timed_seconds > 0 else 0.0

    def event(
        self,
        *,
        hosts: int,
        devices: int,
        lr: float,
        epoch_started: float,
        val,
        top_k: int,
        extra: dict,
    ) -> metrics.EpochMetrics:
        """The finished epoch's metrics event: this host's tallies times ``hosts``, the
        validation ``val`` (a finetune.train.evaluation.Evaluation, or None) and ``extra``
        (the telemetry's fields)."""
        rate = self.rate
        return metrics.EpochMetrics(
            epoch=self.epoch,
            samples=self.samples * hosts,
            samples_per_sec=rate * hosts,
            epoch_seconds=self.seconds + time.monotonic() - epoch_started,
            train_loss=self.loss_sum / max(self.seen, 1),
            train_acc=self.hits / max(self.seen, 1),
            val_acc=val.accuracy if val else None,
            val_top_k=val.top_k_accuracy() if val and top_k else None,
            val_count=val.count if val else None,
            best_epoch=self.best_epoch,
            lr=lr,
            devices=devices,
            hosts=hosts,
            time=time.time(),
            **extra,
        )  # fmt: skip

    def batch_progress(
        self, steps: int, lr: float, hosts: int, epoch_started: float
    ) -> metrics.BatchProgress:
        """Where the epoch stands (its ``log_line()`` is the progress line), the loss synced
        up to now."""
        seconds = self.seconds + time.monotonic() - epoch_started
        return metrics.BatchProgress(
            epoch=self.epoch,
            batch=self.batch,
            steps=steps,
            step=self.step,
            lr=lr,
            train_loss=self.loss_sum / self.seen if self.seen else None,
            images=self.samples,
            seconds=seconds,
            images_per_sec=self.samples * hosts / seconds if seconds > 0 else 0.0,
        )

    def diverged(self, loss: float, tallied_step: int, lr: float) -> ConfigError:
        """The error of a non-finite ``loss``. The loss is summed between syncs (a sync per
        step would stall the device): name the step it was seen at and the steps since the
        last sync (``tallied_step``) it may have become non-finite in."""
        which = "NaN" if math.isnan(loss) else "infinite"
        since = (
            f" (summed over steps {tallied_step + 1}-{self.step})"
            if self.step > tallied_step + 1
            else ""
        )
        return ConfigError(
            f"the training loss became {which} at epoch {self.epoch + 1} step {self.step}{since}, "
            f"with learning rate {lr:g}: training diverged",
            "lower the learning rate and launch again (optimizer.lr_per_device in the recipe, or "
            "lr=VALUE after the recipe's name on the command line).",
        )


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
