"""The final model artifact in /opt/ml/model (SageMaker uploads it as model.tar.gz).

``model-symbol.json`` + ``model-0000.params`` (the hybridized network, loadable without
this package with ``mx.gluon.SymbolBlock.imports`` or ``mx.mod.Module``) and ``gluon.params``;
the engine-neutral loop adds ``classes.json`` (class names in label order, the order of the
network's outputs), ``preprocessing.json`` and the resolved ``hyperparameters.json``.
"""

from __future__ import annotations

from pathlib import Path

from finetune.contracts.hparams import TrainHyperparameters
from finetune.engines.mxnet import MXNET
from finetune.train.engines.mxnet.zoo import mxnet

mx = mxnet()  # MXNet without scikit-learn's import (zoo.py)

PREFIX = "model"
GLUON_PARAMS = MXNET.weights_file  # the model folder's weights, named by the spec


def save_model(net, model_dir: Path, hp: TrainHyperparameters, ctx) -> None:
    """Export the trained (hybridized) network."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    # export needs a graph built by a forward pass; a run resumed after its last epoch has none
    net(mx.nd.zeros((1, 3, hp.image_size, hp.image_size), ctx=ctx))
    net.export(str(model_dir / PREFIX), epoch=0)
    # the same weights in Gluon's own format (structured names, as the model zoo ships them):
    # usable as `weights=` of a later fine-tuning run, which replaces the head
    net.save_parameters(str(model_dir / GLUON_PARAMS))
