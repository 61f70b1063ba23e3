"""Importing MXNet and GluonCV in an environment that also holds PyTorch and scikit-learn.

gluoncv 0.10.5 (the last release) refuses to import when it finds torch >= 2.0 in the same
environment: its ``__init__`` raises RuntimeError("Legacy torch ... detected") instead of
ignoring the unused framework. Our environment holds both engines, so GluonCV is imported
with ``torch`` hidden for the duration of that one import (``import torch`` then raises
ImportError, which GluonCV treats as "no PyTorch"); an already imported torch is untouched.

MXNet 1.9's ``mxnet/model.py`` tries ``from sklearn.base import BaseEstimator`` at import, for
the base class of its legacy ``FeedForward`` API (this engine uses Gluon), and falls back to
``object`` on ImportError. The dev lock holds scikit-learn (the digits of two benchmarks), and
that import pulls in scipy.stats and pandas: 3.66 -> 3.19 CPU-s for mxnet + GluonCV's model
zoo, six runs each on a 2-core EPYC (2026-11-27), in every trainer and predict. :func:`mxnet`
imports MXNet with scikit-learn hidden the same way; the engine's modules import MXNet through
it. It hides scipy.stats as well: ``mxnet.contrib.quantization`` (INT8 calibration's entropy
mode) and ``mxnet.test_utils`` import it at MXNet's import, inside ``try``, and this engine uses
neither: 2.85 -> 2.59 CPU-s for the same imports, three runs each, 2-core EPYC, 2026-11-27.
scipy itself stays: MXNet's sparse arrays and GluonCV's datasets import scipy.sparse and
scipy.io. (A kvstore scheduler or server, cluster.start_role, hides the same two without
importing finetune, which would cost 0.28 CPU-s there.)
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any

from finetune.errors import require_module


@contextlib.contextmanager
def _hidden(name: str) -> Iterator[None]:
    """For the duration: ``import name`` raises ImportError; restored after, imported or not."""
    modules: dict[str, Any] = sys.modules  # a None entry: `import NAME` raises ImportError
    saved = modules.get(name, _MISSING)
    modules[name] = None
    try:
        yield
    finally:
        if saved is _MISSING:
            modules.pop(name, None)
        else:
            modules[name] = saved


_MISSING = object()


def mxnet() -> Any:
    """The mxnet package, imported without scikit-learn and scipy.stats (above);
    DependencyError with the fix when MXNet is not installed."""
    if "mxnet" in sys.modules:
        return sys.modules["mxnet"]
    with _hidden("sklearn"), _hidden("scipy.stats"):
        return require_module("mxnet")


def gluoncv():
    """The gluoncv package (with its model zoo), importable whatever torch is installed."""
    if "gluoncv" in sys.modules:
        return sys.modules["gluoncv"]
    mxnet()
    with _hidden("torch"):
        return importlib.import_module("gluoncv")


def model_zoo():
    """gluoncv.model_zoo."""
    return module("gluoncv.model_zoo")


def module(name: str):
    """A gluoncv submodule (gluoncv itself imported first, torch hidden)."""
    gluoncv()
    return importlib.import_module(name)
