"""The PyTorch engine (torchvision's ImageNet networks: finetune.engines.backbones).
Importing this package imports no torch (:func:`fit` does): a launch looks a run's weights
up in :mod:`finetune.train.engines.torch.weights`, and a file named by its path needs neither
torch nor torchvision (`launch smoke-resnet18-torch pretrained=true weights=FILE --dry-run`,
the demo's fine-tuning: 5.0 -> 0.8 CPU-s, three runs each, 2-core EPYC, 2026-11-27). Nothing
here imports MXNet."""

from __future__ import annotations

from finetune.errors import require_module
from finetune.train import dataset, fitloop
from finetune.train.engine_api import Launched
from finetune.train.layout import TrainJob
from finetune.train.signals import StopRequest


def fit(job: TrainJob, stop: StopRequest | None = None):
    """Train as ``job`` says with PyTorch, resuming from its newest checkpoint; when the job
    needs several processes and this one was not started by torchrun, start them instead
    (finetune.train.engines.torch.launch) and return a Launched."""
    from finetune.train.engines.torch import launch

    stop = StopRequest() if stop is None else stop
    plan = launch.plan(job)
    if plan is not None:
        stop.started()  # (start-up, signals.py) before torchrun's workers start
        return Launched(plan.nproc, plan.world, launch.run(job, plan, stop))
    # the data is checked before torch is imported: a dataset that cannot train fails in a
    # second, not after the seconds torch, torchvision and torch._dynamo take to import
    files = dataset.resolve(job.channels["train"], job.channels["validation"], job.hparams)
    require_module("torchvision")  # here, where the networks are built: not in a launcher
    from finetune.train.engines.torch.session import TorchSession

    stop.started()  # imported; from here on a stop is saved (signals.py)
    session = TorchSession(job, files)
    try:
        return fitloop.fit(job, session, stop)
    finally:
        session.close()


__all__ = ["fit"]
