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


def on_this_machine(name: str) -> bool:
    """True for a backend that trains on this machine: runs there share its processors, so
    they must not run side by side where throughput is measured (a sweep runs one at a time)."""
    check_name(name)
    return name == "local"


def check_name(name: str) -> None:
    """UsageError (with a suggestion) for a backend name that does not exist."""
    if name not in NAMES:
        raise UsageError(
            f"unknown backend {name!r}.{did_you_mean(name, NAMES)}",
            f"use one of: {', '.join(NAMES)}.",
        )


def default_backend(name: str) -> Backend:
    """The backend ``name`` with its default options (what a sweep launches every cell on)."""
    if name == "ec2":
        from finetune.backends.ec2.state import Ec2Options

        return get_backend(name, options=Ec2Options())
    return get_backend(name)


def instance_resources(backend: str, instance: str, count: int = 1, spot: bool = False):
    """Plan resources for ``count`` instances of ``instance`` (a catalog type) on a cloud
    backend: every GPU of each instance (a CPU-only type: its CPU)."""
    from finetune.catalog import instances
    from finetune.plan import Resources

    inst = instances.get(instance)
    return Resources.create(
        backend=backend,
        instance_type=inst.name,
        hosts=count,
        devices_per_host=max(inst.gpu_count, 1),
        device="gpu" if inst.gpu_count else "cpu",
        spot=spot,
    )
