"""The network: a model-zoo ResNet (or the ImageNet-11k symbol checkpoint) with a new head.

GluonCV names the classifier ``output`` (v1/v2) or ``fc`` (v1b/c/d); the 11k checkpoint is
cut at ``flatten0_output`` and gets a Dense head in a small wrapper that also calls it
``output``. Pretrained weights are loaded into a network built with the head size found in
the file, then the head is replaced by one for the dataset's classes. GluonCV is imported
only inside the builder: it is slow to import and pulls in matplotlib.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from finetune.contracts.hparams import TrainHyperparameters
from finetune.engines.models import MODELS, check_model
from finetune.errors import DataError, DependencyError
from finetune.train.engines.mxnet.weights import SYMBOL_MODELS, Weights
from finetune.train.engines.mxnet.zoo import model_zoo, mxnet

mx = mxnet()  # MXNet without scikit-learn's import (zoo.py)
gluon = mx.gluon
HybridBlock: Any = gluon.HybridBlock  # a base class (mypy: a name, not an attribute)

SUPPORTED = list(MODELS["mxnet"])
CUT_LAYER = "flatten0_output"


def check_name(model: str) -> None:
    """ConfigError for a model this engine cannot build (before anything heavy happens)."""
    check_model("mxnet", model)


def build(hp: TrainHyperparameters, contexts: list, weights: Weights | None):
    """The network on ``contexts``: pretrained backbone from ``weights`` (None: random) and a
    fresh head for ``hp.num_classes``; freezing and the head's lr multiplier applied."""
    check_name(hp.model)
    init = mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2)
    if hp.model in SYMBOL_MODELS:
        net = _symbol_net(hp, weights, contexts, init)
    elif weights is None:
        net = _zoo_net(hp.model, hp.num_classes)
        net.initialize(init, ctx=contexts)
    else:
        net = _zoo_net(hp.model, _head_size(weights, _head_name(hp.model)))
        _load(net, weights, contexts)
        _replace_head(net, _head_name(hp.model), hp.num_classes, init, contexts)
    _configure(net, head_of(net), hp)
    return net


def head_of(net):
    """The classifier block of a built network."""
    return net.output if hasattr(net, "output") else net.fc


def _head_name(model: str) -> str:
    return "output" if model.endswith(("_v1", "_v2")) else "fc"


def _zoo_net(model: str, classes: int):
    """A random-init model-zoo network (GluonCV imported here only: it is slow to import)."""
    try:
        return model_zoo().get_model(model, pretrained=False, classes=classes)
    except ImportError:
        if not model.endswith(("_v1", "_v2")):
            raise DependencyError(
                f"model {model} needs GluonCV, which is not installed",
                "install gluoncv==0.10.5.post0 (see scripts/setup.sh), or use a _v1/_v2 ResNet.",
            ) from None
        from mxnet.gluon.model_zoo import vision

        return vision.get_model(model, classes=classes)


def _head_size(weights: Weights, head: str) -> int:
    try:
        saved = mx.nd.load(str(weights.params))
    except mx.base.MXNetError as exc:
        raise DataError(f"{weights.params} is not an MXNet parameter file: {exc}") from None
    key = f"{head}.weight"
    if not isinstance(saved, dict) or key not in saved:
        raise DataError(
            f"{weights.params} has no {key!r}: it is not a Gluon parameter file of this model",
            "use the model zoo's file for this model (NAME-HASH.params), or pretrained=false.",
        )
    return saved[key].shape[0]


def _load(net, weights: Weights, contexts: list) -> None:
    try:
        net.load_parameters(str(weights.params), ctx=contexts)
    except (AssertionError, mx.base.MXNetError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"weights {weights.params} do not fit the model: {first}",
            "use the weights of the same architecture (the model zoo's file for this model).",
        ) from None


def _replace_head(net, head: str, classes: int, init, contexts: list) -> None:
    old = getattr(net, head)
    with net.name_scope():  # parameter names under the network's prefix, like the old head
        new = gluon.nn.Dense(classes, in_units=old.weight.shape[1])
    setattr(net, head, new)
    new.initialize(init, ctx=contexts)


def _configure(net, head, hp: TrainHyperparameters) -> None:
    """Head learning-rate multiplier; a frozen backbone gets no gradients at all, and its
    BatchNorm layers normalise with their stored statistics and never update them (in
    training mode BatchNorm would otherwise keep moving its running mean and variance)."""
    head_params = set(head.collect_params().keys())
    for name, param in net.collect_params().items():
        if name in head_params:
            param.lr_mult = hp.head_lr_mult
        elif hp.freeze_backbone:
            param.grad_req = "null"
    if hp.freeze_backbone:
        net.apply(_freeze_batchnorm)


def _freeze_batchnorm(block) -> None:
    # gluon.nn.BatchNorm passes its _kwargs to the BatchNorm operator on every call (read
    # when the graph is built, so this must happen before hybridize's first forward)
    if isinstance(block, gluon.nn.BatchNorm):
        block._kwargs["use_global_stats"] = True


def _symbol_net(hp: TrainHyperparameters, weights: Weights | None, contexts: list, init):
    """The 11k ResNet-152: its symbol cut before the classifier, plus a new Dense head."""
    if weights is None or weights.symbol is None:
        raise DataError(
            f"{hp.model} is defined by its symbol file, which was not found",
            "provide resnet-152-symbol.json (+ -0000.params) as for pretrained weights.",
        )
    text = Path(weights.symbol).read_text("utf-8")
    if hp.freeze_backbone:  # BatchNorm nodes keep their statistics (see _configure)
        text = _global_stats(text)
    internals = mx.sym.load_json(text).get_internals()
    if CUT_LAYER not in internals.list_outputs():
        raise DataError(f"{weights.symbol} has no layer {CUT_LAYER!r} to cut at")
    with warnings.catch_warnings():  # SymbolBlock warns about the untyped 'data' input
        warnings.simplefilter("ignore")
        features = gluon.SymbolBlock(internals[CUT_LAYER], mx.sym.var("data"))
    if hp.pretrained:
        features.collect_params().load(str(weights.params), ctx=contexts, ignore_extra=True)
    else:
        features.initialize(init, ctx=contexts)
    net = CutNet(features, hp.num_classes)
    net.output.initialize(init, ctx=contexts)
    return net


def _global_stats(symbol_json: str) -> str:
    """The symbol with use_global_stats on every BatchNorm node."""
    graph = json.loads(symbol_json)
    for node in graph.get("nodes", []):
        if node.get("op") == "BatchNorm":
            attrs = node.setdefault("attrs", node.get("attr", {}))
            attrs["use_global_stats"] = "True"
    return json.dumps(graph)


class CutNet(HybridBlock):
    """Features from a symbol checkpoint, then a Dense classifier named ``output``."""

    def __init__(self, features, classes: int):
        super().__init__()
        with self.name_scope():
            self.features = features
            self.output = gluon.nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))
