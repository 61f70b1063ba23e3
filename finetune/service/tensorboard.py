"""Where a run's TensorBoard event files are, and the command that opens them
(`finetune runs show RUN --tensorboard`). The backend says where (Backend.tensorboard_location:
a folder here, or an S3 prefix its trainer's files are uploaded to); this says how to look."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from finetune.errors import DataError

LOGGER = "tensorboard"  # finetune.contracts.hparams.METRIC_LOGGERS


@dataclass(frozen=True)
class TensorBoardPlace:
    """``location``: a folder on this machine or an s3:// prefix; ``command``: a shell line
    that shows it in TensorBoard (copying it here first when it is in S3)."""

    location: str
    command: str
    in_s3: bool


def locate(run, backend) -> TensorBoardPlace:
    """The run's TensorBoard files; a DataError when the run logged none (its recipe named no
    tensorboard logger) or its backend cannot tell where they went."""
    loggers = (run.plan.get("hyperparameters") or {}).get("metric_loggers") or ()
    if LOGGER not in loggers:
        named = ", ".join(loggers) or "none"
        raise DataError(
            f"run {run.id} wrote no TensorBoard files: its metric loggers are {named}",
            "launch with `metric_logging.loggers=[tensorboard]` (docs/training.md, Metric "
            f"loggers); its epoch metrics are in `finetune runs show {run.id}` either way.",
        )
    where = backend.tensorboard_location(run)
    if where is None:
        raise DataError(
            f"the {run.backend} backend has no record of where run {run.id} went "
            "(it was never submitted)",
            f"see `finetune runs show {run.id}`; resume it with `finetune launch --resume`.",
        )
    if not where.startswith("s3://"):
        return TensorBoardPlace(where, f"tensorboard --logdir {shlex.quote(where)}", False)
    local = str(Path(run.run_dir) / "tensorboard") if run.run_dir else f"tensorboard-{run.id}"
    here = shlex.quote(local)
    command = f"aws s3 sync {shlex.quote(where)} {here} && tensorboard --logdir {here}"
    return TensorBoardPlace(where, command, True)
