"""The MXNet 1.9 + GluonCV engine. Importing this package imports MXNet."""

from __future__ import annotations

from finetune.train import dataset, fitloop
from finetune.train.contract import TrainJob
from finetune.train.engines.mxnet.session import MXNetSession
from finetune.train.signals import StopRequest

FitResult = fitloop.FitResult


def fit(job: TrainJob, stop: StopRequest | None = None) -> fitloop.FitResult:
    """Train as ``job`` says with MXNet, resuming from its newest checkpoint."""
    files = dataset.resolve(job.channels["train"], job.channels["validation"], job.hparams)
    return fitloop.fit(job, MXNetSession(job, files), stop)


__all__ = ["FitResult", "fit"]
