"""The stack's spend guard and network fence, checked before a launch.

The caller policies enforce the stack's parameters with conditions: instance types
(``ec2:InstanceType``, ``sagemaker:InstanceTypes``), a SageMaker job's runtime
(``sagemaker:MaxRuntimeInSeconds``) and the VPC of an EC2 run's subnets, groups and network
interfaces (``ec2:Vpc``). AWS would refuse a launch outside them with an encoded
authorization message; finetune reads the parameters (DescribeStacks on the stack named by
FINETUNE_STACK, default ``finetune``) and refuses first, naming the parameter. IAM has no
condition key on an instance count: MaxInstances is enforced here only (and by the
account's Service Quotas). Without the stack, or without permission to describe it, there is
nothing to check here and the policies still decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from finetune import settings
from finetune.aws import retries
from finetune.errors import UsageError


@dataclass(frozen=True)
class Limits:
    stack: str
    vpc: str | None
    ec2_types: tuple[str, ...]
    sagemaker_types: tuple[str, ...]
    max_runtime_s: int | None
    max_instances: int | None
    sagemaker_subnets: tuple[str, ...] = ()  # () : a stack older than these parameters
    sagemaker_groups: tuple[str, ...] = ()


def read(cfn, stack: str | None = None) -> Limits | None:
    """The stack's parameters, or None when the stack cannot be described."""
    stack = stack or settings.get().stack
    try:
        (desc,) = retries.call(cfn.describe_stacks, StackName=stack)["Stacks"]
    except Exception:  # no such stack, or no permission: the policies still decide
        return None
    p = {x["ParameterKey"]: x.get("ParameterValue", "") for x in desc.get("Parameters", [])}

    def listed(key: str) -> tuple[str, ...]:
        # AWS answers "a,b"; moto a Python list's repr "['a', 'b']": both read the same
        items = (v.strip().strip("[]").strip().strip("'\"") for v in p.get(key, "").split(","))
        return tuple(v for v in items if v)

    def number(key: str) -> int | None:
        return int(float(p[key])) if p.get(key) else None

    return Limits(
        stack=stack,
        vpc=p.get("VpcId") or None,
        ec2_types=listed("Ec2InstanceTypes"),
        sagemaker_types=listed("SageMakerInstanceTypes"),
        max_runtime_s=number("MaxRuntimeSeconds"),
        max_instances=number("MaxInstances"),
        sagemaker_subnets=listed("SageMakerSubnets"),
        sagemaker_groups=listed("SageMakerSecurityGroups"),
    )


def _refuse(limits: Limits, parameter: str, what: str, allowed: str) -> UsageError:
    return UsageError(
        f"{what}: the stack {limits.stack}'s {parameter} parameter allows {allowed}, and the "
        "caller policy denies anything else",
        f"pick what it allows, or redeploy with `finetune infra deploy --parameter "
        f"{parameter}=...` (an administrator).",
    )


def check_types(limits: Limits | None, parameter: str, types) -> None:
    """Every instance type in ``types`` matches ``parameter``'s patterns."""
    if limits is None:
        return
    allowed = limits.ec2_types if parameter == "Ec2InstanceTypes" else limits.sagemaker_types
    for name in types:
        if allowed and not any(fnmatchcase(name, pattern) for pattern in allowed):
            raise _refuse(limits, parameter, f"instance type {name}", ", ".join(allowed))


def check_count(limits: Limits | None, count: int) -> None:
    if limits and limits.max_instances is not None and count > limits.max_instances:
        raise _refuse(limits, "MaxInstances", f"{count} instances", str(limits.max_instances))


def check_runtime(limits: Limits | None, seconds: int | None) -> None:
    if limits is None or seconds is None:
        return
    cap = limits.max_runtime_s
    if cap is not None and seconds > cap:
        raise _refuse(limits, "MaxRuntimeSeconds", f"a runtime of {seconds} s", f"{cap} s")


def check_ec2(limits: Limits | None, types, count: int, max_runtime_s: int | None) -> None:
    """An EC2 launch: every instance type (fallbacks too), the hosts, the dead-man switch
    (IAM cannot see an instance's runtime: for EC2 this check is the only one)."""
    check_types(limits, "Ec2InstanceTypes", types)
    check_count(limits, count)
    check_runtime(limits, max_runtime_s)


def check_sagemaker_network(limits: Limits | None, subnets, groups) -> None:
    """A SageMaker job's VpcConfig uses only the stack's SageMakerSubnets and
    SageMakerSecurityGroups (the caller policy's sagemaker:VpcSubnets and
    sagemaker:VpcSecurityGroupIds conditions; "none": no job in a VPC at all)."""
    if limits is None:
        return
    for parameter, allowed, given, what in (
        ("SageMakerSubnets", limits.sagemaker_subnets, subnets, "subnet"),
        ("SageMakerSecurityGroups", limits.sagemaker_groups, groups, "security group"),
    ):
        for item in given:
            if allowed and item not in allowed:
                raise _refuse(limits, parameter, f"{what} {item}", ", ".join(allowed))


def check_vpc(limits: Limits | None, subnets: list[dict]) -> None:
    """Every subnet lies in the stack's VpcId (the only VPC the policy launches into)."""
    if limits is None or not limits.vpc:
        return
    for s in subnets:
        if s.get("VpcId") != limits.vpc:
            raise _refuse(
                limits, "VpcId", f"subnet {s['SubnetId']} is in {s.get('VpcId')}", limits.vpc
            )
