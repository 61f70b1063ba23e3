"""Optional metric loggers (``metric_logging.loggers``: tensorboard, mlflow): copies of the
run's figures where people already watch training; the JSON-lines metrics and the ledger stay
the record, and a logger that fails is dropped with one warning (docs/trainer.md: metric
loggers)."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from finetune.contracts.container import TrainJob
    from finetune.contracts.hparams import TrainHyperparameters
    from finetune.contracts.metrics import EpochMetrics

from finetune.contracts.hparams import METRIC_LOGGERS as NAMES  # noqa: F401 (the one list)

MLFLOW_DB = "mlflow.db"  # the default store, in the run's output folder (/opt/ml/output/data)
RUN_ID_ENV = "FINETUNE_RUN_ID"  # the ledger's run id, set by the backends that know it
# EpochMetrics fields copied to the loggers as epoch/<name>
EPOCH_FIELDS = (
    "train_loss", "train_acc", "val_acc", "val_top_k", "samples_per_sec", "epoch_seconds",
    "lr", "input_wait_fraction", "gpu_util_pct", "gpu_mem_gib", "pct_of_peak",
)  # fmt: skip

log = logging.getLogger(__name__)


class MetricLogger(Protocol):
    """One destination for the run's figures."""

    name: str

    def params(self, params: Mapping[str, str], tags: Mapping[str, str]) -> None:
        """The run's hyperparameters and record, once at the start."""

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Figures measured at optimizer step ``step``."""

    def close(self, status: str) -> None:
        """The run ended (FINISHED), was stopped to resume later (KILLED) or failed (FAILED)."""


class Loggers:
    """All the run's loggers as one; none at all is the usual case and costs nothing."""

    def __init__(self, loggers: list[MetricLogger] | None = None):
        self.loggers = list(loggers or [])

    def __bool__(self) -> bool:
        return bool(self.loggers)

    def params(self, params: Mapping[str, str], tags: Mapping[str, str]) -> None:
        self._each("params", params, tags)

    def step(self, step: int, loss: float | None, lr: float, images_per_sec: float) -> None:
        """A progress point: the loss synced up to now, the rate and images/s."""
        values = {"train/lr": lr, "train/images_per_sec": images_per_sec}
        if loss is not None:
            values["train/loss"] = loss
        self._each("scalars", step, _finite(values))

    def epoch(self, step: int, event: EpochMetrics, eur_so_far: float | None) -> None:
        """An epoch's metrics event (finetune.contracts.metrics), at the step it ended on."""
        fields = event.model_dump()
        values = {f"epoch/{k}": fields[k] for k in EPOCH_FIELDS if fields.get(k) is not None}
        values["epoch/epoch"] = event.epoch
        if eur_so_far is not None:
            values["epoch/eur_so_far"] = eur_so_far
        self._each("scalars", step, _finite(values))

    def close(self, status: str) -> None:
        self._each("close", status)
        self.loggers = []

    def _each(self, method: str, *args) -> None:
        for logger in list(self.loggers):
            try:
                getattr(logger, method)(*args)
            except Exception as exc:  # a copy of the metrics never ends a run
                self.loggers.remove(logger)
                _warn(logger.name, f"failed ({type(exc).__name__}: {exc}); no longer logging to it")


def start(job: TrainJob, hp: TrainHyperparameters, record: Mapping) -> Loggers:
    """The run's loggers, started and given its hyperparameters (params) and ``record``
    (tags: finetune.contracts.record plus the engine's environment); none when the recipe
    names none."""
    if not hp.metric_loggers:
        return Loggers()
    name = (
        os.environ.get(RUN_ID_ENV)
        or f"{hp.mlflow_experiment or 'finetune'}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    loggers = open_loggers(hp, job, name)
    loggers.params(hp.to_strings(), _tags(record, name))
    return loggers


def _tags(record: Mapping, run_name: str) -> dict[str, str]:
    """The record flattened to strings (nested values as JSON); the hyperparameters are params."""
    tags = {"finetune.run": run_name}
    for key, value in record.items():
        if key == "hyperparameters" or value is None:
            continue
        tags[f"finetune.{key}"] = (
            value if isinstance(value, str) else json.dumps(value, default=str)
        )
    return tags


def open_loggers(hp: TrainHyperparameters, job: TrainJob, run_name: str) -> Loggers:
    """The loggers ``hp.metric_loggers`` names, started for ``job`` (see the module doc)."""
    started: list[MetricLogger] = []
    for name in hp.metric_loggers:
        try:
            started.append(_start(name, hp, job, run_name))
        except Exception as exc:  # see the module doc
            _warn(
                name, f"could not start ({type(exc).__name__}: {exc}); the run goes on without it"
            )
    return Loggers(started)


def _start(name: str, hp: TrainHyperparameters, job: TrainJob, run_name: str) -> MetricLogger:
    out = job.layout.output_data_dir
    if name == "tensorboard":
        from finetune.train.metriclog.tensorboard import TensorBoardLogger  # imports torch's

        return TensorBoardLogger(job.layout.tensorboard_dir)  # /opt/ml/output/tensorboard
    from finetune.train.metriclog.mlflowlog import MlflowLogger  # imports MLflow

    uri = hp.mlflow_tracking_uri or f"sqlite:///{(out / MLFLOW_DB).resolve()}"
    out.mkdir(parents=True, exist_ok=True)
    experiment = hp.mlflow_experiment or "finetune"
    return MlflowLogger(uri, experiment, run_name, job.checkpoint_dir)


def eur_so_far(hp: TrainHyperparameters, seconds: float) -> float | None:
    """Euros spent so far at the plan's price (``hp.eur_per_hour``: the one money function's
    euros for an hour of all the run's instances, finetune.estimate.money) for ``seconds`` of
    training; None on this machine (no price)."""
    if hp.eur_per_hour <= 0:
        return None
    return hp.eur_per_hour * seconds / 3600.0


def _finite(values: dict) -> dict:
    return {k: float(v) for k, v in values.items() if math.isfinite(float(v))}


def _warn(name: str, what: str) -> None:
    line = f"finetune-warning metric logger {name} {what}"
    log.warning("%s", line)
    print(line, flush=True)
