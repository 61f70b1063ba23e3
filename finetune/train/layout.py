"""The SageMaker training-container contract: where inputs are and where outputs go.

SageMaker (and our local and EC2 backends, which recreate the same layout) hands a training
container this tree; a bring-your-own image must read the JSON files itself (the SM_*
environment variables exist only where SageMaker's training toolkit is installed)::

    /opt/ml/input/config/hyperparameters.json   string map -> TrainHyperparameters
    /opt/ml/input/config/inputdataconfig.json   channels: train, validation (+ pretrained)
    /opt/ml/input/config/resourceconfig.json    current_host, hosts
    /opt/ml/input/config/checkpointconfig.json  LocalPath (default /opt/ml/checkpoints)
    /opt/ml/input/data/<channel>/               the channel's files
    /opt/ml/model/                              final model artifact
    /opt/ml/output/data/                        metrics.jsonl
    /opt/ml/output/tensorboard/                 TensorBoard event files (the tensorboard logger);
                                                SageMaker's TensorBoardOutputConfig LocalPath
    /opt/ml/output/failure                      why the job failed (first 1,024 chars shown)

``FINETUNE_ML_ROOT`` moves the whole tree (local runs and tests use a temporary one).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from finetune.contracts.hparams import TrainHyperparameters
from finetune.engines.models import check_model
from finetune.errors import ConfigError, DataError, did_you_mean

ROOT_ENV = "FINETUNE_ML_ROOT"
TOOLKIT_PREFIX = "sagemaker_"  # SageMaker training toolkit hyperparameters
DEFAULT_ROOT = Path("/opt/ml")
TENSORBOARD_SUBDIR = "output/tensorboard"  # under the root; /opt/ml/output/tensorboard
REQUIRED_CHANNELS = ("train", "validation")
OPTIONAL_CHANNELS = ("pretrained",)  # weight files, for runs without internet access

log = logging.getLogger(__name__)


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


def load_job(layout: Layout) -> TrainJob:
    """Read the four config files; ConfigError/DataError say which file and what to fix."""
    raw = _read_json(layout, "hyperparameters.json")
    # sagemaker_* keys are the training toolkit's own (sagemaker_program, ...): not ours to read
    ours = {k: v for k, v in raw.items() if not k.startswith(TOOLKIT_PREFIX)}
    hparams = TrainHyperparameters.from_strings(ours)
    # a model its engine cannot build fails here, not after seconds of importing the engine
    check_model(hparams.engine, hparams.model)
    channels = _channels(layout)
    current_host, hosts = _resources(layout)
    if len(hosts) != hparams.hosts:
        log.warning(
            "the cluster has %d host(s) but the hyperparameters were planned for %d: the "
            "learning rate and batch size follow the plan",
            len(hosts),
            hparams.hosts,
        )
    return TrainJob(layout, hparams, channels, _checkpoint_dir(layout), current_host, hosts)


def _read_json(layout: Layout, name: str, required: bool = True) -> dict:
    path = layout.config_dir / name
    if not path.is_file():
        if not required:
            return {}
        raise ConfigError(
            f"{path} is missing: this is not a SageMaker-style training container tree",
            f"run through `finetune launch` (it writes {name}), or set {ROOT_ENV} to the root "
            "of a tree that has input/config/.",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc})", f"rewrite {name}.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a {type(data).__name__}, not an object", f"fix {name}.")
    return data


def _channels(layout: Layout) -> dict[str, Path]:
    """The input channels, by name. A channel this trainer does not read is an error: a
    misnamed one (``training``) would otherwise train on nothing or the wrong files."""
    config = _read_json(layout, "inputdataconfig.json", required=False)
    if not config:  # no inputdataconfig.json (hand-made tree): the folders are the channels
        data = layout.root / "input" / "data"
        config = {p.name: {} for p in sorted(data.iterdir()) if p.is_dir()} if data.is_dir() else {}
    known = REQUIRED_CHANNELS + OPTIONAL_CHANNELS
    unknown = [name for name in config if name not in known]
    missing = [name for name in REQUIRED_CHANNELS if name not in config]
    if unknown or missing:
        raise ConfigError(_channel_problem(unknown, missing, known), _CHANNEL_FIX)
    for name, spec in config.items():
        mode = spec.get("TrainingInputMode", "File")
        if mode not in ("File", "FastFile"):
            raise ConfigError(
                f"channel {name!r} uses input mode {mode}: this trainer reads files",
                "use TrainingInputMode File (or FastFile) for every channel.",
            )
    channels = {name: layout.channel_dir(name) for name in config}
    for name, path in channels.items():
        if not path.is_dir():
            raise DataError(
                f"channel {name!r} is declared but {path} does not exist",
                "check the channel's S3 URI (or local path) points at the prepared dataset.",
            )
    return channels


_CHANNEL_FIX = (
    "name the input channels train and validation (each pointing at the prepared dataset "
    "folder; `finetune launch` does this), plus optionally pretrained for weight files."
)


def _channel_problem(unknown: list[str], missing: list[str], known: tuple[str, ...]) -> str:
    parts = []
    for name in unknown:
        parts.append(f"input channel {name!r} is not one this trainer reads.")
        parts.append(did_you_mean(name, known).strip())
    if missing:
        parts.append(f"Missing channel(s): {', '.join(missing)}.")
    parts.append(
        f"Expected channels: {', '.join(REQUIRED_CHANNELS)} "
        f"(optional: {', '.join(OPTIONAL_CHANNELS)})."
    )
    return " ".join(p for p in parts if p)


def _resources(layout: Layout) -> tuple[str, tuple[str, ...]]:
    config = _read_json(layout, "resourceconfig.json", required=False)
    current = str(config.get("current_host", "algo-1"))
    hosts = tuple(str(h) for h in config.get("hosts", [current]))
    if current not in hosts:
        raise ConfigError(
            f"resourceconfig.json: current_host {current!r} is not in hosts {list(hosts)}",
            "fix resourceconfig.json (SageMaker writes it; local backends must copy its form).",
        )
    return current, hosts


def _checkpoint_dir(layout: Layout) -> Path:
    config = _read_json(layout, "checkpointconfig.json", required=False)
    return layout.relocate(config.get("LocalPath") or str(DEFAULT_ROOT / "checkpoints"))
