"""Importing MXNet and GluonCV in an environment that also holds PyTorch and scikit-learn:
GluonCV with ``torch`` hidden (it refuses to import beside torch >= 2.0), MXNet with
``sklearn`` and ``scipy.stats`` hidden (it only tries them, and they cost a second of every
trainer's start-up). docs/decisions/004-mxnet-import.md says why and what it saves."""

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
        return require_module("mxnet", extra="mxnet")


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
