"""Training engines behind one call, ``fit(job)``, chosen by the hyperparameters' ``engine``:
MXNet (GluonCV, the studies' engine, GPUs before Hopper) and PyTorch (torchvision, today's
GPUs), both behind finetune.train.fitloop.Session."""

from __future__ import annotations

from dataclasses import dataclass

from finetune.errors import ConfigError, require_module

ENGINES = ("mxnet", "torch")


@dataclass(frozen=True)
class Launched:
    """What ``fit`` returns in a process that started the run's training processes (torchrun)
    instead of training itself; they wrote the outputs and printed their own lines."""

    processes: int  # on this host
    world: int  # in the whole run
    stopped_by: str | None


def fit(job, stop=None):
    """Run ``job`` with its engine (imported here: engines are heavy and optional); ``stop``
    is a finetune.train.signals.StopRequest, checked after every batch."""
    engine = job.hparams.engine
    if engine == "mxnet":
        require_module("mxnet")
        from finetune.train.engines.mxnet import fit as mxnet_fit

        return mxnet_fit(job, stop)
    if engine == "torch":
        require_module("torch")
        require_module("torchvision")
        from finetune.train.engines.torch import fit as torch_fit

        return torch_fit(job, stop)  # (several processes: a Launched)
    raise ConfigError(f"unknown engine {engine!r}", f"use one of: {', '.join(ENGINES)}.")
