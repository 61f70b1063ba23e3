"""The training container's contract, shared by the trainer and every backend: the /opt/ml
tree SageMaker hands a container (our local and EC2 backends recreate it), the input
channels, how a stopped trainer says so, what a complete model folder holds, and the variable
that names the hosts' addresses. The tree::

    /opt/ml/input/config/{hyperparameters,inputdataconfig,resourceconfig,checkpointconfig}.json
    /opt/ml/input/data/<channel>/   the channel's files (finetune.data.channels)
    /opt/ml/model/                  the final model (MODEL_FILES, written last)
    /opt/ml/output/data/            metrics.jsonl, run-record.json
    /opt/ml/output/tensorboard/     TensorBoard events (SageMaker's TensorBoardOutputConfig)
    /opt/ml/output/failure          why the job failed (SageMaker shows its first 1,024 chars)

``FINETUNE_ML_ROOT`` moves the whole tree (local runs and tests use a temporary one).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from finetune.contracts.hparams import TrainHyperparameters
from finetune.errors import DataError
from finetune.files import write_atomic

ROOT_ENV = "FINETUNE_ML_ROOT"
DEFAULT_ROOT = Path("/opt/ml")
TENSORBOARD_SUBDIR = "output/tensorboard"  # under the root
TOOLKIT_PREFIX = "sagemaker_"  # SageMaker training toolkit's own hyperparameters
REQUIRED_CHANNELS = ("train", "validation")
OPTIONAL_CHANNELS = ("pretrained",)  # weight files, for runs without internet access

# A stopped trainer exits EX_TEMPFAIL ("try again") and leaves output/stopped.json plus a
# failure reason that starts with STOPPED_MARK: every reader can tell it from a finished run.
EXIT_STOPPED = 75
STOPPED_MARK = "finetune-stopped"
STOPPED_FILE = "stopped.json"
STARTING = "during start-up"  # mark_stopped's ``where`` for a stop before the first step
# the files of a complete model folder (the trainer writes hyperparameters.json last)
MODEL_FILES = ("classes.json", "preprocessing.json", "hyperparameters.json")

ADDRESS_OVERRIDE_ENV = "FINETUNE_HOST_ADDRESS_OVERRIDE"  # every host at one address (tests)
ADDRESSES_ENV = "FINETUNE_HOST_ADDRESSES"  # JSON {"algo-1": "10.0.0.5", ...} (the EC2 agent)


@dataclass(frozen=True)
class Layout:
    """The paths of one /opt/ml tree."""

    root: Path

    @classmethod
    def from_env(cls) -> Layout:
        return cls(Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT))

    @property
    def config_dir(self) -> Path:
        return self.root / "input" / "config"

    def channel_dir(self, name: str) -> Path:
        return self.root / "input" / "data" / name

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def output_data_dir(self) -> Path:
        return self.root / "output" / "data"

    @property
    def tensorboard_dir(self) -> Path:
        """Where the tensorboard metric logger writes: SageMaker's default TensorBoard
        LocalPath, which its TensorBoardOutputConfig uploads (the EC2 agent mirrors it)."""
        return self.root / TENSORBOARD_SUBDIR

    @property
    def failure_file(self) -> Path:
        return self.root / "output" / "failure"

    def relocate(self, path: str) -> Path:
        """A path SageMaker wrote as /opt/ml/..., moved under this root when it is not /opt/ml
        (a checkpointconfig.json copied from a real job still works in a temporary tree)."""
        p = Path(path)
        if self.root != DEFAULT_ROOT and p.is_relative_to(DEFAULT_ROOT):
            return self.root / p.relative_to(DEFAULT_ROOT)
        return p


@dataclass(frozen=True)
class TrainJob:
    """Everything the engine needs, read and checked before any heavy import."""

    layout: Layout
    hparams: TrainHyperparameters
    channels: dict[str, Path]
    checkpoint_dir: Path
    current_host: str
    hosts: tuple[str, ...]

    @property
    def pretrained_dir(self) -> Path | None:
        return self.channels.get("pretrained")

    @property
    def is_first_host(self) -> bool:
        """The host that writes the model, metrics.jsonl and the checkpoints of a multi-host
        job (the workers' parameters are identical; MXNet's ranks need not follow host order)."""
        return self.current_host == min(self.hosts)

    @property
    def metrics_file(self) -> Path:
        return self.layout.output_data_dir / "metrics.jsonl"


def stopped_file(ml_root: Path) -> Path:
    """Where a trainer stopped by a signal leaves its marker in an /opt/ml tree."""
    return Path(ml_root) / "output" / STOPPED_FILE


def mark_stopped(ml_root: Path, signal_name: str, where: str) -> str:
    """Leave the marker of a stop after a checkpoint (``where``: the position it saved, or
    STARTING: stopped before its first step, nothing new to save); returns the reason text,
    which also goes where SageMaker reads FailureReason from."""
    if where == STARTING:
        reason = (
            f"{STOPPED_MARK}: stopped by {signal_name} during start-up, before its first step "
            "(no new checkpoint: nothing had trained); the run is unfinished and resumes from "
            "its newest checkpoint, if any, when started again"
        )
    else:
        reason = (
            f"{STOPPED_MARK}: stopped by {signal_name} after a checkpoint ({where}); the run "
            "is unfinished and resumes from that checkpoint when started again"
        )
    doc = {"signal": signal_name, "where": where, "reason": reason, "time": time.time()}
    path = stopped_file(ml_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc) + "\n")
    return reason


def read_stopped(ml_root: Path) -> dict | None:
    """The stop marker of an /opt/ml tree, or None when the last trainer did not stop."""
    try:
        doc = json.loads(stopped_file(ml_root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def missing_model_files(model_dir: Path) -> list[str]:
    """The MODEL_FILES a model folder lacks (none: it is complete)."""
    return [name for name in MODEL_FILES if not (Path(model_dir) / name).is_file()]


def model_written(model_dir: Path) -> bool:
    """Whether a model folder is complete: a run is "completed" only with one."""
    return not missing_model_files(model_dir)


def check_model_folder(model_dir: Path, what: str | None = None) -> None:
    """A DataError when ``model_dir`` lacks any of MODEL_FILES, the one message for it
    everywhere; ``what`` names the folder there (default: its path)."""
    missing = missing_model_files(model_dir)
    if missing:
        *first, last = MODEL_FILES
        raise DataError(
            f"{what or model_dir} is not a finetune model folder: it lacks {', '.join(missing)}",
            "give the id of a completed run, or the model folder of one (it holds "
            f"{', '.join(first)} and {last}).",
        )
