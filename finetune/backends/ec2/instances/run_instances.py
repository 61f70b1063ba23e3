"""One RunInstances attempt with capacity fallback, idempotency and honest failures.

- Capacity errors (InsufficientInstanceCapacity and kin) move on to the next subnet/zone,
  then to the next instance type or market; when everything failed, the error lists every
  try. Quota errors stop at once: another zone would not lift a quota.
- A multi-host attempt is ONE RunInstances with MinCount = MaxCount = hosts (all or nothing),
  so the tag lookup below covers every host of the attempt.
- A launch never starts a second instance for the same attempt: before each RunInstances we
  look for an instance tagged with this run, attempt and our own aws:userid (moto and a lost
  reply both defeat ClientToken alone; another caller's instance bearing our run's tags is
  never taken), and the ClientToken makes EC2 itself return the same instance on retry.
- A freshly created instance profile takes seconds to be usable: that error is retried.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from finetune.aws import retries
from finetune.backends.ec2.request import LaunchSpec, run_instances_kwargs
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.state import Candidate
from finetune.errors import CloudError

CAPACITY_CODES = {
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientFreeAddressesInSubnet",
    "Unsupported",  # the type is not offered in this zone
    "SpotMaxPriceTooLow",
}
QUOTA_CODES = {
    "VcpuLimitExceeded",
    "InstanceLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "SpotInstanceLimitExceeded",
}
RETRIES = 4
PROFILE_PROPAGATION_SLEEP = 5.0  # seconds, times the try number


@dataclass
class Launched:
    spec: LaunchSpec
    instances: list[dict]  # host order: algo-1, algo-2, ... (by AmiLaunchIndex)
    tried: list[str]

    @property
    def instance(self) -> dict:
        return self.instances[0]


class _NoCapacity(Exception):
    pass


def base_spec(
    run_id: str,
    state,
    first: Candidate,
    ami: str,
    root: str,
    max_runtime_s: int,
    count: int = 1,
    owner_id: str = "",
):
    """The LaunchSpec of the next attempt of ``state`` (subnet and group chosen by launch);
    ``owner_id``: this session's aws:userid, the instances' finetune:owner-id tag."""
    return LaunchSpec(
        count=count,
        run_id=run_id,
        attempt=len(state.attempts) + 1,
        instance_type=first.instance_type,
        spot=first.spot,
        subnet_id="",
        security_group_id="",
        ami=ami,
        root_device=root,
        instance_profile=state.instance_profile,
        owner=state.owner,
        region=state.region,
        image=state.image,
        bucket=state.bucket,
        run_prefix=state.prefix,
        dataset_uri=state.dataset_uri,
        max_runtime_s=max_runtime_s,
        plan_sha256=state.plan_sha256,
        owner_id=owner_id,
    )


def launch(
    ec2, base: LaunchSpec, choices: list[Candidate], subnets: list[dict], groups: dict[str, str]
) -> Launched:
    """Launch ``base`` with the first candidate and subnet that has capacity; ``groups`` maps
    each subnet's VPC to its security group."""
    tried: list[str] = []
    for ci, cand in enumerate(choices):
        for si, subnet in enumerate(subnets):
            spec = replace(
                base,
                instance_type=cand.instance_type,
                spot=cand.spot,
                subnet_id=subnet["SubnetId"],
                security_group_id=groups[subnet["VpcId"]],
            )
            where = f"{cand.describe()} in {subnet['AvailabilityZone']} ({subnet['SubnetId']})"
            try:
                found = _run_one(ec2, spec, f"{spec.run_id}-a{spec.attempt}-c{ci}-s{si}")
            except _NoCapacity as exc:
                tried.append(f"{where}: {exc}")
                continue
            return Launched(spec, sorted(found, key=lambda i: i.get("AmiLaunchIndex", 0)), tried)
    raise CloudError(
        "no capacity for this run; tried:\n  " + "\n  ".join(tried),
        "try again later, allow more zones (--az / --subnet), other instance types "
        "(--fallback-instance), or on-demand capacity (no --spot, or "
        "--allow-on-demand-fallback).",
    )


def _run_one(ec2, spec: LaunchSpec, token: str) -> list[dict]:
    kwargs = run_instances_kwargs(spec, token[:64])
    for n in range(1, RETRIES + 1):
        existing = _ours(ec2, spec)
        if existing:  # a launch of this attempt already happened (lost reply, retried command)
            return existing  # one RunInstances per attempt: all its hosts, or none
        try:
            return ec2.run_instances(**kwargs)["Instances"]  # one attempt: retries are here
        except Exception as exc:
            if not _retryable(exc, spec) or n == RETRIES:
                retries.note_attempts(exc, n)  # the message says how often we tried
                raise _classified(exc, spec) from None
            # tests replace retries.sleep to count instead of waiting
            retries.sleep(PROFILE_PROPAGATION_SLEEP * n if _profile_not_ready(exc) else n)
    raise AssertionError("unreachable")


def _ours(ec2, spec: LaunchSpec) -> list[dict]:
    """Live instances of this attempt that this session launched: run id, attempt and
    finetune:owner-id all match (anyone may tag an instance with our run and attempt)."""
    if not spec.owner_id:  # without our id nothing can be told ours
        return []
    return ec2_infra.find_instances(ec2, spec.run_id, spec.attempt, owner_id=spec.owner_id)


def _retryable(exc: Exception, spec: LaunchSpec) -> bool:
    """Throttling, 5xx and broken connections (the reply may be lost: the next round looks
    for the instance first), and a profile that is not usable yet; never capacity or quota."""
    code = ec2_infra.error_code(exc)
    if code in CAPACITY_CODES or code in QUOTA_CODES:
        return False
    return retries.is_retryable(exc) or _profile_not_ready(exc)


def _profile_not_ready(exc: Exception) -> bool:
    return ec2_infra.error_code(exc) == "InvalidParameterValue" and "iamInstanceProfile" in str(exc)


def _classified(exc: Exception, spec: LaunchSpec) -> Exception:
    code = ec2_infra.error_code(exc)
    if code in CAPACITY_CODES:
        return _NoCapacity(code)
    if code in QUOTA_CODES:
        market = "Spot" if spec.spot else "On-Demand"
        said = (getattr(exc, "response", None) or {}).get("Error", {}).get("Message") or exc
        hosts = f"{spec.count} x " if spec.count > 1 else ""
        return CloudError(
            f"EC2 quota reached launching {hosts}{spec.instance_type}: {code}: {said}",
            f"ask for more 'Running {market} ... instances' vCPUs in Service Quotas for "
            f"{spec.region}, or pick a smaller instance type.",
        )
    return ec2_infra.cloud_error(exc, f"RunInstances for {spec.instance_type}")
