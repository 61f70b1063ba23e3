"""The heavy SDKs, imported on first use: a module names them at its top (``from
finetune.adaptors import boto3``) and pays for the import only when it touches one, so
`finetune --help` and the light commands stay instant. A missing package is a DependencyError
that names the extra to install. (The frameworks load in the engines' runtimes, which import
them when a job runs; the SageMaker SDK in aws/sdk.py, after its environment is set.)"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from finetune.errors import require_module


class LazyImport:
    """A module imported at its first attribute access (SkyPilot's adaptors do the same)."""

    def __init__(self, name: str, extra: str) -> None:
        self._name, self._extra = name, extra
        self._module: ModuleType | None = None

    def load(self) -> ModuleType:
        """The module, imported now if it was not yet."""
        if self._module is None:
            self._module = require_module(self._name, extra=self._extra)
        return self._module

    def __getattr__(self, attribute: str) -> Any:
        module = self.load()
        try:
            return getattr(module, attribute)
        except AttributeError:  # a submodule not imported by its package: import it
            return importlib.import_module(f"{self._name}.{attribute}")

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r}, {state}>"


boto3 = LazyImport("boto3", "aws")
botocore = LazyImport("botocore", "aws")
matplotlib = LazyImport("matplotlib", "mxnet")  # GluonCV's, so the mxnet extra carries it
