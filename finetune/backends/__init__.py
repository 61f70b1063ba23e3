"""Backends: where a Plan runs. One small module each behind one Protocol (base.Backend)."""

from __future__ import annotations

from finetune.backends.base import Backend
from finetune.errors import UsageError, did_you_mean

NAMES = ("local", "sagemaker", "ec2")


def get_backend(name: str, **options) -> Backend:
    """The backend called ``name``; its module (and SDK) is imported only now."""
    if name == "local":
        from finetune.backends.local.backend import LocalBackend

        return LocalBackend(**options)
    if name == "ec2":
        from finetune.backends.ec2.backend import Ec2Backend

        return Ec2Backend(**options)
    if name == "sagemaker":
        from finetune.backends.sagemaker.backend import SageMakerBackend

        return SageMakerBackend(**options)
    if name in NAMES:
        raise UsageError(
            f"the {name} backend is not available in this version of finetune",
            "use --backend local for now.",
        )
    raise UsageError(
        f"unknown backend {name!r}.{did_you_mean(name, NAMES)}", f"use one of: {', '.join(NAMES)}."
    )
