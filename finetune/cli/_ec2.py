"""`launch --backend ec2`: its options turned into plan Resources and an Ec2Backend."""

from __future__ import annotations

from finetune.errors import UsageError


def ec2_resources(instance: str | None, count: int, spot: bool):
    """Resources for one instance type from the catalog: all its GPUs (CPU-only types: cpu)."""
    from finetune.catalog import instances
    from finetune.plan import Resources

    if not instance:
        raise UsageError(
            "--backend ec2 needs an instance type",
            "pass --instance TYPE, e.g. --instance g5.xlarge (`finetune prices` lists them).",
        )
    inst = instances.get(instance)
    return Resources.create(
        backend="ec2",
        instance_type=inst.name,
        hosts=count,
        devices_per_host=max(inst.gpu_count, 1),
        device="gpu" if inst.gpu_count else "cpu",
        spot=spot,
    )


def ec2_backend(
    *,
    ami: str | None,
    subnets: list[str] | None,
    azs: list[str] | None,
    max_runtime: str | None,
    max_eur: float | None,
    max_restarts: int,
    allow_on_demand_fallback: bool,
    fallback_instances: list[str] | None,
    read_prefixes: list[str] | None = None,
):
    """An Ec2Backend carrying the launch options (they are stored with the run)."""
    from finetune.backends import get_backend
    from finetune.backends.ec2.state import DEFAULT_MAX_RUNTIME_S, Ec2Options
    from finetune.cli._duration import parse_duration

    runtime = parse_duration(max_runtime, "--max-runtime") if max_runtime else DEFAULT_MAX_RUNTIME_S
    options = Ec2Options(
        ami=ami,
        subnets=tuple(subnets or ()),
        azs=tuple(azs or ()),
        max_runtime_s=runtime,
        max_eur=max_eur,
        max_restarts=max_restarts,
        allow_on_demand_fallback=allow_on_demand_fallback,
        fallback_instances=tuple(fallback_instances or ()),
        read_prefixes=tuple(read_prefixes or ()),
    )
    return get_backend("ec2", options=options)
