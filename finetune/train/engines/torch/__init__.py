"""The PyTorch engine (torchvision ResNets). Importing this package imports torch; nothing
here imports MXNet."""

from __future__ import annotations

from finetune.train import dataset, fitloop
from finetune.train.contract import TrainJob
from finetune.train.engines.torch.session import TorchSession
from finetune.train.signals import StopRequest


def fit(job: TrainJob, stop: StopRequest | None = None) -> fitloop.FitResult:
    """Train as ``job`` says with PyTorch, resuming from its newest checkpoint."""
    files = dataset.resolve(job.channels["train"], job.channels["validation"], job.hparams)
    return fitloop.fit(job, TorchSession(job, files), stop)


__all__ = ["fit"]
