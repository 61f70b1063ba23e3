"""The PyTorch engine's runtime (its spec: finetune.engines.torch). Importing this package
imports no torch: each call imports what it needs, so a launch can ask where a run's weights
come from without it (docs/decisions/002-light-engine-imports.md). Nothing here imports MXNet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from finetune.contracts.container import TrainJob
from finetune.contracts.engine import EngineRuntime, StopFlag, WeightsSource
from finetune.engines import timmzoo
from finetune.errors import require_module
from finetune.train import dataset, fitloop
from finetune.train.engine_api import Launched
from finetune.train.engines.torch import hub, launch, weights
from finetune.train.signals import StopRequest


class TorchRuntime:
    """The torch engine behind finetune.contracts.engine.EngineRuntime."""

    def fit(self, job: TrainJob, stop: StopFlag | None = None) -> object:
        """Train as ``job`` says, resuming from its newest checkpoint; when the job needs
        several processes and this one was not started by torchrun, start them instead
        (finetune.train.engines.torch.launch) and return a Launched."""
        require_module("torch", extra="torch")
        stop = StopRequest() if stop is None else stop
        plan = launch.plan(job)
        if plan is not None:
            stop.started()  # (start-up, signals.py) before torchrun's workers start
            return Launched(plan.nproc, plan.world, launch.run(job, plan, stop))
        # the data is checked before torch is imported: a dataset that cannot train fails at once
        files = dataset.resolve(job.channels["train"], job.channels["validation"], job.hparams)
        require_module(
            "torchvision", extra="torch"
        )  # here, where the networks are built: not in a launcher
        from finetune.train.engines.torch.session import TorchSession  # imports torch

        stop.started()  # imported; from here on a stop is saved (signals.py)
        session = TorchSession(job, files)
        try:
            return fitloop.fit(job, session, stop)
        finally:
            session.close()

    def weights_source(self, model: str, weights_: str, sha256: str, here: bool) -> WeightsSource:
        if timmzoo.is_timm(model):  # timm's weights: the Hugging Face hub's, or a file
            return hub.source(model, weights_, sha256, here)
        return weights.source(model, weights_, sha256, here)

    def predict_scores(self, model_dir: Path, rec: Path, idx: Path) -> Any:
        return _predict().scores(model_dir, rec, idx)

    def export(self, model_dir: Path, out: Path) -> list[str]:
        require_module("onnxscript", extra="torch")  # torch.onnx's exporter needs it
        return _predict().export(model_dir, out)

    def count_step(self, model: str, image_size: int, precision: str) -> tuple | None:
        if not timmzoo.is_timm(model):  # the model table's networks are in the bundled counts
            return None
        from finetune.train.engines.torch import traffic_count  # imports torch

        net = timmzoo.meta_network(model, image_size)
        return traffic_count.row(model, net, image_size, precision)

    def after_failure(self, code: int) -> None:
        """Nothing to do: torchrun's workers end with their launcher."""


def _predict():
    require_module("torchvision", extra="torch")
    from finetune.train.engines.torch import predict  # imports torch

    return predict


RUNTIME: EngineRuntime = TorchRuntime()
