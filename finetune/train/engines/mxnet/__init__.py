"""The MXNet 1.9 + GluonCV engine. Importing this package imports no MXNet (and nothing
heavy): on several hosts its launcher (:mod:`finetune.train.engines.mxnet.cluster`) must set
the parameter server's DMLC_* variables before MXNet is imported, and `launch` asks
:mod:`finetune.train.engines.mxnet.kvstore` when it plans a run; :func:`fit` imports MXNet."""

from __future__ import annotations

from typing import TYPE_CHECKING

from finetune.train.engines.mxnet import cluster, zoo
from finetune.train.layout import TrainJob
from finetune.train.signals import StopRequest

if TYPE_CHECKING:
    from finetune.train.dataset import DatasetFiles
    from finetune.train.fitloop import FitResult


def fit(job: TrainJob, stop: StopRequest | None = None) -> FitResult:
    """Train as ``job`` says with MXNet, resuming from its newest checkpoint; on several hosts
    with a dist kvstore, as the worker of this host's parameter-server roles."""
    if cluster.plan_for(job) is None:  # one host: the data is checked before MXNet imports
        return _train(job, stop, _files(job))
    if stop is not None:
        stop.started()  # (start-up, signals.py): the roles start processes of their own
    with cluster.roles(job):
        return _train(job, stop, None)


def _files(job: TrainJob) -> DatasetFiles:
    from finetune.train import dataset

    return dataset.resolve(job.channels["train"], job.channels["validation"], job.hparams)


def _train(job: TrainJob, stop: StopRequest | None, files: DatasetFiles | None) -> FitResult:
    # (a frame of its own: the session, and its kvstore, are garbage when it returns, and
    # freeing the kvstore is what says goodbye to the cluster in cluster.roles)
    from finetune.train import fitloop

    zoo.mxnet()  # after the roles set DMLC_*; a DependencyError when MXNet is missing
    from finetune.train.engines.mxnet.session import MXNetSession

    if stop is not None:
        stop.started()  # imported; from here on a stop is saved (signals.py)
    files = _files(job) if files is None else files
    return fitloop.fit(job, MXNetSession(job, files), stop)


__all__ = ["fit"]
