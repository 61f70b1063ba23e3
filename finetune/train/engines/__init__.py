"""Training engines behind one call, ``fit(job)``, chosen by the hyperparameters' ``engine``:
MXNet (GluonCV, the studies' engine, GPUs before Hopper) and PyTorch (torchvision, today's
GPUs), both behind finetune.train.engine_api.Session."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from finetune.engines import registry
from finetune.engines.registry import NAMES as ENGINES
from finetune.errors import require_module
from finetune.train.engine_api import Launched

__all__ = [
    "ENGINES",
    "Launched",
    "WeightsSource",
    "exit_if_abandoned",
    "export_model",
    "fit",
    "predict_scores",
    "weights_source",
]


@dataclass(frozen=True)
class WeightsSource:
    """Where a run's pretrained weights come from, seen from the launching machine: a file
    already here (``cached``), or an address to fetch (``url``) into ``dest`` (``size``
    bytes, 0 unknown; ``sha256``: the full digest it must have, "" when only its name's
    prefix is checked). ``by_job``: the engine's trainer fetches it itself, never the
    launching machine (the model zoo's own download)."""

    model: str
    cached: Path | None = None
    url: str = ""
    dest: Path | None = None
    sha256: str = ""
    size: int = 0
    by_job: bool = False


def weights_source(
    engine: str, model: str, weights: str, sha256: str = "", here: bool = True
) -> WeightsSource:
    """Where ``model``'s pretrained weights would come from (nothing fetched): for a run on
    this machine (``here``: its caches count), or on another (only what it can fetch or
    is given counts). DataError with the fix when they cannot be had at all."""
    import importlib

    registry.get(engine)  # an unknown engine: ConfigError
    # no framework check: the published addresses need at most torchvision (imported there)
    module = importlib.import_module(f"finetune.train.engines.{engine}.weights")
    return module.source(model, weights, sha256, here)


def fit(job, stop=None):
    """Run ``job`` with its engine (imported here: engines are heavy and optional); ``stop``
    is a finetune.train.signals.StopRequest, checked after every batch. Each engine starts
    its own processes on several devices or hosts (MXNet: parameter-server roles; torch:
    torchrun: a Launched)."""
    return registry.get(job.hparams.engine).fit()(job, stop)


def exit_if_abandoned(code: int) -> None:
    """After a failure (its reason written): end this process at once with ``code`` when an
    engine left its processes behind -- MXNet's kvstore would otherwise wait at exit for
    workers that never come (finetune.train.engines.mxnet.cluster)."""
    from finetune.train.engines.mxnet import cluster

    cluster.exit_if_abandoned(code)


def predict_scores(engine: str, model_dir, rec, idx):
    """(N, classes) scores of a model folder's network for every record of ``rec``, read
    through the validation transform the run was measured with."""
    return registry.get(engine).module("predict").scores(model_dir, rec, idx)


def export_model(engine: str, model_dir, out) -> list[str]:
    """The engine's portable model files (ONNX for torch, symbol + params for MXNet) into
    the folder ``out``; returns their names."""
    described = registry.get(engine)
    for module in described.export_needs:  # e.g. torch.onnx's exporter needs onnxscript
        require_module(module, extra=engine)
    return described.module("predict").export(model_dir, out)
