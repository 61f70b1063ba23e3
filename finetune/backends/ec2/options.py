"""`launch --backend ec2` before anything exists: the options model (the launch flags this
backend takes), resources from the catalog, a dataset already in S3, and the pre-flight that
--dry-run shows -- region, instances, runtime cap and euro cap, the account's quota -- with
every check a launch runs that writes nothing."""

from __future__ import annotations

from pydantic import Field

from finetune.backends import base
from finetune.backends.ec2 import checks as ec2_checks
from finetune.backends.ec2.setup import quota as ec2_quota
from finetune.backends.ec2.state import DEFAULT_MAX_RUNTIME_S, Ec2Options, Ec2State
from finetune.durations import Duration
from finetune.errors import CloudError, ConfigError, UsageError


class Ec2LaunchOptions(base.Options):
    """The EC2 backend's launch flags."""

    ami: str | None = None
    subnet: tuple[str, ...] = ()
    az: tuple[str, ...] = ()
    max_runtime: Duration = Field(DEFAULT_MAX_RUNTIME_S, gt=0)
    max_eur: float | None = Field(None, gt=0)
    max_restarts: int = Field(3, ge=0)
    allow_on_demand_fallback: bool = False
    fallback_instance: tuple[str, ...] = ()
    read_prefix: tuple[str, ...] = ()  # s3:// prefixes the run may read besides its dataset

    def state_options(self) -> Ec2Options:
        """The options as stored with the run (ec2.json), for status, stop and resume."""
        return Ec2Options(
            ami=self.ami,
            subnets=self.subnet,
            azs=self.az,
            max_runtime_s=self.max_runtime,
            max_eur=self.max_eur,
            max_restarts=self.max_restarts,
            allow_on_demand_fallback=self.allow_on_demand_fallback,
            fallback_instances=self.fallback_instance,
            read_prefixes=self.read_prefix,
        )


def resources(request: base.ResourceRequest):
    """All GPUs of ``count`` instances of one type from the catalog (CPU-only types: cpu)."""
    from finetune.catalog import instances
    from finetune.plan import Resources

    if not request.instance:
        raise UsageError(
            "--backend ec2 needs an instance type",
            "pass --instance TYPE, e.g. --instance g5.xlarge (`finetune prices` lists them).",
        )
    inst = instances.get(request.instance)
    return Resources.create(
        backend="ec2",
        instance_type=inst.name,
        hosts=request.count,
        devices_per_host=max(inst.gpu_count, 1),
        device="gpu" if inst.gpu_count else "cpu",
        spot=request.spot,
    )


def dataset_summary(uri: str):
    from finetune.aws.session import configured_region
    from finetune.backends import s3dataset

    return s3dataset.summarize(uri, configured_region(None))


def check(plan, options: Ec2Options, clients):
    """Preflight (bucket, image, runtime, fallbacks), the region, the runtime --max-eur
    affords at the price the launch would pay, and the family's vCPU quota; returns the
    base.Preflight and the prices asked (ec2.cost.Quotes: the launch right after uses them)."""
    from finetune.aws.session import configured_region
    from finetune.backends.ec2 import cost as ec2_cost
    from finetune.backends.ec2.setup import ami as ec2_ami
    from finetune.backends.pricing import with_estimate
    from finetune.catalog import instances

    arch = ec2_checks.preflight(plan, options)  # the engine on these GPUs, fallbacks, image
    engine = plan.hyperparameters.engine
    plan = plan.with_runtime(ec2_ami.runtime(engine, arch, options.ami))
    region = configured_region(None)
    if not region:
        raise ConfigError(
            "no AWS region is set for the ec2 backend",
            "set FINETUNE_REGION (or a region in your AWS config).",
        )
    plan = with_estimate(plan, region, "ec2")
    res = plan.resources
    from finetune.backends.ec2.instances.relaunch import Candidate

    choice = Candidate(res.instance_type, res.spot)
    quotes = ec2_cost.quotes([choice], region, clients("ec2", region))  # the launch's, too
    quote = quotes.of(choice)
    usd, source = quote.usd_per_hour, quote.source
    state = Ec2State(region, "", "", "", "", "", options)  # a new run: nothing spent yet
    # the same guard as the launch: the dearest choice (here the only one), all its hosts
    cap = ec2_cost.runtime_cap(state, ec2_cost.dearest({choice: quote}, res.hosts))
    inst = instances.get(res.instance_type)
    needed = inst.vcpus * res.hosts
    found = ec2_quota.read(clients("service-quotas", region), res.instance_type, res.spot)
    rows = [
        ("region", region),
        ("instances", f"{res.hosts} x {res.instance_type} ({'spot' if res.spot else 'on demand'})"),
        ("price", f"USD {usd:.3f}/h per instance ({source})" if usd else source),
        ("runtime cap", _hours(cap) + _why_cap(cap, options)),
        ("euro cap", f"EUR {options.max_eur:g}" if options.max_eur else "none (--max-eur)"),
        ("quota", _quota_row(found, needed)),
        ("bucket", ec2_checks.bucket()),
    ]
    if engine != "torch":  # torch runs on AWS's PyTorch AMI: no image of ours
        rows.insert(-1, ("image", ec2_checks.image(options)))
    why = ec2_quota.problem(found, needed, region)
    error = CloudError(why, ec2_quota.how_to_raise(found, needed, region)) if why else None
    return base.Preflight(plan, rows, title="EC2 instances", error=error), quotes


def _hours(seconds: int) -> str:
    return f"{seconds / 3600:.2f} h ({seconds} s)"


def _why_cap(cap: int, options: Ec2Options) -> str:
    if cap < options.max_runtime_s:
        return f", what --max-eur {options.max_eur:g} pays for"
    return " (--max-runtime)"


def _quota_row(found: ec2_quota.Quota, needed: int) -> str:
    if found.vcpus is None:
        return f"{found.name}: not readable ({found.why_unknown}); needs {needed} vCPUs"
    return f"{found.name}: {found.vcpus:g} vCPUs; this launch needs {needed}"
