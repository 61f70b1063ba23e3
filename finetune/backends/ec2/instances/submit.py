"""One launch attempt of an EC2 run, step by step: the image, where it may land, the run's
role, the prices (asked once), the runtime cap and the spec, the intent noted, RunInstances
(run_instances.py), the hosts published, and the attempt recorded.

`launch` reads top down; each step is a small function. What the ledger should keep (the
intent, before RunInstances; the image; the plan with the AMI it runs on) goes into the
journal: service/ writes it, this module never opens the ledger.
"""

from __future__ import annotations

import time
from dataclasses import replace

from finetune.aws import stacklimits
from finetune.aws.datasetscope import read_prefixes
from finetune.aws.infra import boundary_arn
from finetune.aws.session import partition_of
from finetune.backends import shipping
from finetune.backends.base import Journal
from finetune.backends.ec2 import cost as ec2_cost
from finetune.backends.ec2 import preflight as ec2_checks
from finetune.backends.ec2.instances import hosts as ec2_hosts
from finetune.backends.ec2.instances import intent as ec2_intent
from finetune.backends.ec2.instances import relaunch as ec2_relaunch
from finetune.backends.ec2.instances import run_instances
from finetune.backends.ec2.request import instance_policy
from finetune.backends.ec2.setup import ami as ec2_ami
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.setup import profile as ec2_profile
from finetune.backends.ec2.state import AttemptRecord, Ec2State
from finetune.engines import registry
from finetune.errors import FinetuneError
from finetune.plan import Plan


def launch(
    clients,
    run,
    state: Ec2State,
    choices: list[ec2_relaunch.Candidate],
    prefer_subnet: str | None,
    journal: Journal,
    quotes: ec2_cost.Quotes | None = None,
) -> AttemptRecord:
    """A new attempt of ``run`` on the first of ``choices`` (then subnet) with capacity.
    ``quotes``: prices the pre-flight already asked for (asked here when they do not cover
    ``choices``)."""
    plan = Plan.model_validate(run.plan)
    ec2 = clients("ec2", state.region)
    count = plan.resources.hosts
    arch, image = _image(clients, state, plan)
    limits = stacklimits.read(clients("cloudformation", state.region))
    types = [c.instance_type for c in choices] + list(state.options.fallback_instance)
    stacklimits.check_ec2(limits, types, count, state.options.max_runtime)
    owner_id = ec2_infra.owner_id(clients("sts", state.region))  # tags what it makes
    subnets, groups = _placement(ec2, state, (run.id, count, owner_id), prefer_subnet, limits)
    state.instance_profile = _role(clients, run.id, state)
    if quotes is None or not quotes.covers(choices, state.region):
        quotes = ec2_cost.quotes(choices, state.region, ec2)
    cap = ec2_cost.runtime_cap(state, ec2_cost.dearest({c: quotes.of(c) for c in choices}, count))
    first = run_instances.base_spec(
        run.id, state, choices[0], image.ami_id, image.root_device, cap, count, owner_id
    )
    first = _with_engine(clients, state, first, plan.hyperparameters, image)
    _note_intent(run, state, first.attempt, journal, owner_id)
    launched = run_instances.launch(ec2, first, choices, subnets, groups)
    if count > 1:
        _publish_hosts(clients, ec2, state, launched)
    record = _attempt(launched, quotes, count)
    state.attempts.append(record)
    state.intent, state.tried = None, launched.tried
    state.save(run.run_dir)
    engine = plan.hyperparameters.engine
    where = f"{image.name or 'name unknown'}; from {image.source}"
    journal.event("image", f"attempt {record.n}: {engine} on {image.ami_id} ({where})")
    recorded = plan.with_runtime({**ec2_ami.runtime(engine, arch), **image.record()})
    journal.update(plan=recorded.model_dump(mode="json"))
    return record


def _image(clients, state: Ec2State, plan) -> tuple[str, ec2_ami.AmiChoice]:
    """The instance's CPU architecture (after the checks that cost nothing) and its AMI."""
    arch = ec2_checks.preflight(plan, state.options)
    ssm, ec2 = clients("ssm", state.region), clients("ec2", state.region)
    engine = plan.hyperparameters.engine
    return arch, ec2_ami.resolve(ssm, ec2, arch, engine, state.options.ami)


def _placement(ec2, state: Ec2State, run: tuple, prefer_subnet: str | None, limits):
    """The subnets to try (the interrupted one first), in the stack's VPC, and each VPC's
    security group (the run's own self-only cluster group where several hosts talk)."""
    opts = state.options
    vpc = limits.vpc if limits else None
    found = ec2_infra.subnets(ec2, opts.subnet, opts.az, vpc)
    stacklimits.check_vpc(limits, found)
    subnets = ec2_relaunch.subnet_order(found, prefer_subnet)
    run_id, count, owner_id = run
    if count > 1:
        groups = {
            s["VpcId"]: ec2_hosts.cluster_group(ec2, s["VpcId"], run_id, owner_id) for s in subnets
        }
    else:
        groups = {s["VpcId"]: ec2_infra.security_group(ec2, s["VpcId"]) for s in subnets}
    return subnets, groups


def _role(clients, run_id: str, state: Ec2State) -> str:
    """The run's own instance profile: its S3 prefix, its dataset, its image; no more."""
    reads = read_prefixes(state.dataset_uri, state.bucket, state.options.read_prefix)
    partition = partition_of(state.region)
    policy = instance_policy(state.bucket, state.prefix, reads, state.image, partition)
    sts = clients("sts", state.region)
    boundary = boundary_arn(ec2_infra.account(sts), state.region, "ec2")
    owner = (state.owner, ec2_infra.owner_id(sts))
    return ec2_profile.ensure_instance_profile(
        clients("iam", state.region), run_id, policy, boundary, owner
    )


def _with_engine(clients, state: Ec2State, spec, hp, image):
    """The spec for ``hp.engine``: an engine on AWS's framework AMI installs our wheel
    (uploaded to the run's prefix) into the AMI's python, and the metric loggers' packages
    when the recipe names loggers; one that needs our image runs it (already in the state)."""
    if registry.get(hp.engine).needs_our_image:
        return spec
    wheel, digest = ec2_ami.upload_wheel(clients("s3", state.region), state.bucket, state.prefix)
    lock = shipping.METRICS_LOCK if hp.metric_loggers else ""
    return replace(
        spec,
        engine=hp.engine,
        wheel_uri=wheel,
        wheel_sha256=digest,
        python=image.python,
        metrics_lock=lock,
    )


def _note_intent(run, state: Ec2State, attempt: int, journal: Journal, owner_id: str) -> None:
    """The coming attempt, kept in ec2.json and the ledger before RunInstances: a launch
    killed after EC2 made the instances is found again by their tags (its owner id too)."""
    note = ec2_intent.record(state, run.id, attempt, f"{run.id}-a{attempt}", owner_id)
    state.save(run.run_dir)
    journal.event("intent", note)


def _publish_hosts(clients, ec2, state: Ec2State, launched) -> None:
    """hosts.json for a multi-host attempt; its instances end if it cannot be written."""
    try:
        s3 = clients("s3", state.region)
        attempt = launched.spec.attempt
        ec2_hosts.publish(ec2, s3, state.bucket, state.prefix, attempt, launched.instances)
    except FinetuneError:
        ec2_infra.terminate(ec2, [i["InstanceId"] for i in launched.instances])  # lost hosts
        raise


def _attempt(launched, quotes: ec2_cost.Quotes, count: int) -> AttemptRecord:
    """The attempt as it landed, at the price of the zone it landed in."""
    spec, inst = launched.spec, launched.instance
    az = inst.get("Placement", {}).get("AvailabilityZone", "")
    quote = quotes.paid(ec2_relaunch.Candidate(spec.instance_type, spec.spot), az)
    return AttemptRecord(
        n=spec.attempt,
        instance_id=inst["InstanceId"],
        instance_type=spec.instance_type,
        spot=spec.spot,
        subnet_id=spec.subnet_id,
        az=az,
        launched_at=_timestamp(inst.get("LaunchTime")),
        usd_per_hour=quote.usd_per_hour,
        price_source=quote.source,
        price_as_of=quote.as_of,
        instance_ids=[i["InstanceId"] for i in launched.instances] if count > 1 else [],
    )


def _timestamp(value) -> float:
    return value.timestamp() if hasattr(value, "timestamp") else time.time()
