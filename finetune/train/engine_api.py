"""What an engine gives the epoch loop (finetune.train.fitloop): a :class:`Session` with a
:class:`ProcessGroup` and a telemetry, every member always there.

A run of one process per host (the MXNet engine; the torch engine without torchrun) has the
null group :class:`OneProcess`: one process, local rank 0, each decision its own. Several
processes that train together (the torch engine under torchrun) agree after every step on
stopping and checkpointing, validate their shards together, and only local rank 0 prints.
An engine that measures nothing has finetune.train.telemetry.NoTelemetry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # (annotations only: the entrypoint imports this module before any engine)
    from finetune.contracts.engine import StopFlag
    from finetune.contracts.hparams import TrainHyperparameters
    from finetune.train import dataset
    from finetune.train.checkpoints import Checkpoint
    from finetune.train.evaluation import Evaluator


class ProcessGroup(Protocol):
    """The processes that train one run together and decide together."""

    world: int  # processes in the run (1: this one alone)
    local_rank: int  # this process's place on its host (0 prints the host's lines)

    def agree(self, stop: StopFlag, save_due: bool) -> tuple[bool, bool]:
        """(stop, checkpoint now), one answer for every process, taken in a collective all
        reach after the same step; the caller acts on it, not on its own flag."""


class Telemetry(Protocol):
    """Hardware figures of each epoch (finetune.train.telemetry)."""

    def begin_epoch(self) -> None:
        """An epoch starts (its warm-up first)."""

    def start_timing(self) -> None:
        """The warm-up is over: the epoch's measured part starts now."""

    def end_timing(self) -> None:
        """The epoch's measured part is over (validation comes next)."""

    def epoch_fields(self, samples_per_sec: float, timed_seconds: float) -> dict:
        """The epoch's fields of the metrics event (none: {})."""

    def summary(self, epoch: int, fields: dict) -> str | None:
        """The epoch's ``finetune-telemetry`` line (None: nothing measured, nothing said)."""


class OneProcess:
    """The null group: this process trains alone (on its host) and decides alone."""

    world = 1
    local_rank = 0

    def agree(self, stop: StopFlag, save_due: bool) -> tuple[bool, bool]:
        """The local answer: this process's own stop flag and its own save decision."""
        return bool(stop), save_due


class Session(Protocol):
    """What an engine provides for one run (see finetune.train.engines)."""

    files: dataset.DatasetFiles  # the prepared splits (checked against the hyperparameters)
    devices: int  # devices in use on this host
    hosts: int  # hosts training together
    is_first_host: bool  # the host that validates, checkpoints and writes the outputs

    @property
    def group(self) -> ProcessGroup:
        """The processes of the run (OneProcess when alone)."""

    @property
    def telemetry(self) -> Telemetry:
        """This run's hardware figures (NoTelemetry when the engine measures nothing)."""

    def build(self, hp: TrainHyperparameters, steps: int, resume: Checkpoint | None) -> None:
        """Network, optimizer and loaders for ``hp`` (rescaled to the devices found)."""

    def begin_epoch(self, epoch: int, batch: int) -> None:
        """Position the training loader at ``batch`` of ``epoch`` (0 unless resumed)."""

    def step(self, lr: float) -> int:
        """One optimizer step at ``lr``; returns the images it trained on (this host)."""

    def sync(self) -> tuple[float, int, int]:
        """Wait for queued work; (loss sum, hits, images) since the last sync."""

    def evaluate(
        self, split: str, evaluator: Evaluator | None, stop: StopFlag, shared: bool = False
    ) -> bool:
        """Feed every batch of ``split`` (unshuffled) to ``evaluator``; False if stopped.
        ``shared``: every process of the group takes its shard and the evaluator of rank 0
        gets them all (the others pass None); only asked when the group has several."""

    def write_checkpoint(self, folder: Path) -> None:
        """Parameters and optimizer state into ``folder``."""

    def load_weights(self, checkpoint: Checkpoint) -> None:
        """A checkpoint's parameters into the network (for the best model)."""

    def export(self, model_dir: Path) -> None:
        """The engine's model files into ``model_dir``."""

    def environment(self) -> dict:
        """Framework versions, devices, and the nondeterminism this engine cannot remove."""


@dataclass(frozen=True)
class Launched:
    """What an engine's ``fit`` returns in a process that started the run's training
    processes (torchrun) instead of training itself; they wrote the outputs and printed
    their own lines."""

    processes: int  # on this host
    world: int  # in the whole run
    stopped_by: str | None
