"""The trainer: runs where the GPUs are (a SageMaker container, an EC2 instance, or a local
subprocess) and reads the SageMaker container contract.

Start a run with ``python -m finetune.train`` on an /opt/ml tree (``FINETUNE_ML_ROOT`` moves
it; see :mod:`finetune.train.layout`), or in-process with :func:`main`. Nothing here
imports MXNet until training starts; the CLI never imports this package.
"""

from __future__ import annotations

__all__ = ["main"]


def __getattr__(name: str):
    # main is imported when asked for, not with the package: the light modules under it
    # (finetune.engines.registry, which the hyperparameters' contract reads) must be
    # importable without the entrypoint, which imports that contract itself
    if name == "main":
        from finetune.train.entrypoint import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
