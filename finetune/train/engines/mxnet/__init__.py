"""The MXNet 1.9 + GluonCV engine's runtime (its spec: finetune.engines.mxnet). Importing this
package imports no MXNet: on several hosts its launcher (cluster.py) must set the parameter
server's DMLC_* variables first, so each call imports MXNet itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from finetune.contracts.container import TrainJob
from finetune.contracts.engine import EngineRuntime, StopFlag, WeightsSource
from finetune.train import dataset, fitloop
from finetune.train.dataset import DatasetFiles
from finetune.train.engines.mxnet import cluster, weights, zoo
from finetune.train.fitloop import FitResult


class MxnetRuntime:
    """The MXNet engine behind finetune.contracts.engine.EngineRuntime."""

    def fit(self, job: TrainJob, stop: StopFlag | None = None) -> FitResult:
        """Train as ``job`` says, resuming from its newest checkpoint; on several hosts with
        a dist kvstore, as the worker of this host's parameter-server roles."""
        if cluster.plan_for(job) is None:  # one host: the data is checked before MXNet imports
            return _train(job, stop, _files(job))
        if stop is not None:
            stop.started()  # (start-up, signals.py): the roles start processes of their own
        with cluster.roles(job):
            return _train(job, stop, None)

    def weights_source(self, model: str, weights_: str, sha256: str, here: bool) -> WeightsSource:
        return weights.source(model, weights_, sha256, here)

    def predict_scores(self, model_dir: Path, rec: Path, idx: Path) -> Any:
        return _predict().scores(model_dir, rec, idx)

    def export(self, model_dir: Path, out: Path) -> list[str]:
        return _predict().export(model_dir, out)

    def count_step(self, model: str, image_size: int, precision: str) -> tuple | None:
        return None  # its zoo's networks are all in the bundled counts

    def after_failure(self, code: int) -> None:
        """A multi-host job that failed ends here: MXNet's kvstore would wait at exit for
        workers that never come (cluster.exit_if_abandoned)."""
        cluster.exit_if_abandoned(code)


def _files(job: TrainJob) -> DatasetFiles:
    return dataset.resolve(job.channels["train"], job.channels["validation"], job.hparams)


def _train(job: TrainJob, stop: StopFlag | None, files: DatasetFiles | None) -> FitResult:
    # a frame of its own: the session, and its kvstore, are garbage when it returns, and
    # freeing the kvstore is what says goodbye to the cluster in cluster.roles
    zoo.mxnet()  # after the roles set DMLC_*; a DependencyError when MXNet is missing
    from finetune.train.engines.mxnet.session import MXNetSession  # imports MXNet

    if stop is not None:
        stop.started()  # imported; from here on a stop is saved (signals.py)
    files = _files(job) if files is None else files
    return fitloop.fit(job, MXNetSession(job, files), stop)


def _predict():
    zoo.mxnet()
    from finetune.train.engines.mxnet import predict  # imports MXNet

    return predict


RUNTIME: EngineRuntime = MxnetRuntime()
