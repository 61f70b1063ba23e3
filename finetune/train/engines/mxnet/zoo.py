"""Importing GluonCV next to a current PyTorch.

gluoncv 0.10.5 (the last release) refuses to import when it finds torch >= 2.0 in the same
environment: its ``__init__`` raises RuntimeError("Legacy torch ... detected") instead of
ignoring the unused framework. Our environment holds both engines, so GluonCV is imported
with ``torch`` hidden for the duration of that one import (``import torch`` then raises
ImportError, which GluonCV treats as "no PyTorch"); an already imported torch is untouched.
"""

from __future__ import annotations

import contextlib
import importlib
import sys


@contextlib.contextmanager
def _torch_hidden():
    saved = sys.modules.get("torch", _MISSING)
    sys.modules["torch"] = None  # import torch -> ImportError
    try:
        yield
    finally:
        if saved is _MISSING:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = saved


_MISSING = object()


def gluoncv():
    """The gluoncv package (with its model zoo), importable whatever torch is installed."""
    if "gluoncv" in sys.modules:
        return sys.modules["gluoncv"]
    with _torch_hidden():
        return importlib.import_module("gluoncv")


def model_zoo():
    """gluoncv.model_zoo."""
    return module("gluoncv.model_zoo")


def module(name: str):
    """A gluoncv submodule (gluoncv itself imported first, torch hidden)."""
    gluoncv()
    return importlib.import_module(name)
