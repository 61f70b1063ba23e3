"""The trainer's view of the container (finetune.contracts.container): the job it is given,
read from the config files of an /opt/ml tree and checked before anything heavy is imported.
A bring-your-own image must read those JSON files itself: the SM_* environment variables
exist only where SageMaker's training toolkit is installed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from finetune.contracts.container import (
    DEFAULT_ROOT,
    OPTIONAL_CHANNELS,
    REQUIRED_CHANNELS,
    ROOT_ENV,
    TOOLKIT_PREFIX,
    Layout,
    TrainJob,
)
from finetune.contracts.hparams import TrainHyperparameters
from finetune.engines.models import check_model
from finetune.errors import ConfigError, DataError, did_you_mean

log = logging.getLogger(__name__)


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
