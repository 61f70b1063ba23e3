"""The MXNet 1.9 + GluonCV engine. Importing this package imports MXNet."""

from finetune.train.engines.mxnet.loop import FitResult, fit

__all__ = ["FitResult", "fit"]
