"""The infra stack (infra/cloudformation.yaml): print it, print its policies as plain IAM JSON,
and deploy it with CloudFormation.

The template and policies/*.json ship inside the package (finetune/infra/; the repository's
infra/ links to them); a test keeps the policy files identical to the template's documents.
"""

from __future__ import annotations

import functools
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.aws.session import partition_of
from finetune.errors import CloudError, DataError, UsageError
from finetune.settings.names import check_bucket, check_region

TEMPLATE = "cloudformation.yaml"
POLICIES = {
    "caller": "sagemaker-caller.json",
    "ec2-caller": "../ec2-caller-policy.json",
    "ec2-boundary": "ec2-run-boundary.json",
    "sagemaker-boundary": "sagemaker-run-boundary.json",
    # not in the stack: a resource control policy for an organization's administrator, so
    # that only EC2 and SageMaker themselves assume run roles (infra/README.md, residual risks)
    "perimeter": "run-role-perimeter.json",
}
BOUNDARY_PATH = "/finetune/"
# The stack's Ec2RunBoundary and SageMakerRunBoundary, one of each per region: a run role
# carries its own backend's (what its caller policy lets CreateRole set).
BOUNDARIES = {"ec2": "Ec2RunBoundary", "sagemaker": "SageMakerRunBoundary"}
BOUNDARY_NAME = "finetune-{kind}-run-boundary-{region}"
# Where run roles live since the boundaries were split: no older finetune could create a role
# there, so nothing without a boundary matches the caller policies' PassRole.
RUN_ROLE_ROOT = "/finetune-bounded/"
LEGACY_ROLE_PATH = "/finetune/"  # run roles of older versions (some without any boundary)
STACK = "finetune"  # the stack's default name (`infra deploy --stack-name`, FINETUNE_STACK)
DONE = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS")
FAILED = ("FAILED", "ROLLBACK")


def boundary_arn(account: str, region: str, kind: str) -> str:
    """The ARN of the stack's permissions boundary for ``kind`` (ec2 or sagemaker) run roles:
    every such role must carry it (its caller policy allows CreateRole only with it)."""
    if kind not in BOUNDARIES:
        raise ValueError(f"no boundary for {kind!r}")
    name = BOUNDARY_NAME.format(kind=kind, region=region)
    return f"arn:{partition_of(region)}:iam::{account}:policy{BOUNDARY_PATH}{name}"


def run_role_path(kind: str) -> str:
    """The IAM path of ``kind``'s (ec2, sagemaker) run roles and instance profiles."""
    if kind not in BOUNDARIES:
        raise ValueError(f"no run roles for {kind!r}")
    return f"{RUN_ROLE_ROOT}{kind}/"


def parameter_defaults() -> dict:
    """The template's parameters with their defaults (lists as lists; none: a placeholder)."""
    return dict(_parameter_defaults(template_text()))


@functools.lru_cache(maxsize=4)
def _parameter_defaults(text: str) -> tuple:
    import yaml

    out = {}
    for name, spec in yaml.safe_load(template_text())["Parameters"].items():
        value = spec.get("Default", name.upper())
        if spec["Type"] == "CommaDelimitedList":
            value = [v.strip() for v in str(value).split(",")]
        out[name] = tuple(value) if isinstance(value, list) else str(value)
    return tuple(out.items())


def infra_dir() -> Path:
    """The templates shipped with the package."""
    here = Path(__file__).resolve().parents[1] / "infra"
    if not (here / TEMPLATE).is_file():
        raise DataError(
            f"the infra templates are not at {here}: this installation is incomplete",
            "reinstall finetune (bash scripts/setup.sh, or pip install the package again).",
        )
    return here


def template_text() -> str:
    return (infra_dir() / TEMPLATE).read_text()


def policy_document(kind: str) -> dict:
    """A policy as the template holds it (CloudFormation intrinsics in place)."""
    if kind not in POLICIES:
        raise UsageError(f"no policy {kind!r}", f"use one of: {', '.join(POLICIES)}.")
    return json.loads((infra_dir() / "policies" / POLICIES[kind]).read_text())


@dataclass
class Names:
    """Values for the template's references; defaults are readable placeholders."""

    account: str = "ACCOUNT_ID"
    region: str = "REGION"
    bucket: str = "BUCKET"
    repository: str = "finetune"
    role_arn: str = ""
    stack: str = STACK
    extra: dict = field(default_factory=dict)  # parameter values, or any other reference

    def __post_init__(self) -> None:
        """A region or bucket given (not a placeholder) is checked as FINETUNE_* are."""
        if self.region != "REGION":
            check_region(self.region, "--region")
        if self.bucket != "BUCKET":
            check_bucket(self.bucket, "--bucket")

    def values(self) -> dict[str, str]:
        partition = partition_of(self.region) if self.region != "REGION" else "aws"
        boundaries = {
            ref: f"arn:{partition}:iam::{self.account}:policy{BOUNDARY_PATH}"
            + BOUNDARY_NAME.format(kind=kind, region=self.region)
            for kind, ref in BOUNDARIES.items()
        }
        params = {
            k: list(v) if isinstance(v, tuple) else v for k, v in parameter_defaults().items()
        }
        return {
            **params,
            **boundaries,
            "AWS::StackName": self.stack,
            "AWS::Partition": partition,
            "AWS::URLSuffix": "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com",
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "Bucket": self.bucket,
            "Bucket.Arn": f"arn:{partition}:s3:::{self.bucket}",
            "Repository.Arn": (
                f"arn:{partition}:ecr:{self.region}:{self.account}:repository/{self.repository}"
            ),
            "ExecutionRole.Arn": self.role_arn
            or f"arn:{partition}:iam::{self.account}:role/FINETUNE_EXECUTION_ROLE",
            **self.extra,
        }


def render(document, names: Names):
    """``document`` with Fn::Sub, Fn::GetAtt, Ref, Fn::Join and Fn::Split replaced: a plain
    IAM policy."""
    values = names.values()
    if isinstance(document, list):
        return [render(item, names) for item in document]
    if not isinstance(document, dict):
        return document
    if set(document) == {"Fn::Sub"}:
        return re.sub(r"\$\{([^}]+)\}", lambda m: str(values[m.group(1)]), document["Fn::Sub"])
    if set(document) == {"Fn::GetAtt"}:
        return values[".".join(document["Fn::GetAtt"])]
    if set(document) == {"Ref"}:
        return values[document["Ref"]]
    if set(document) == {"Fn::Join"}:  # a list parameter's values inside ARNs
        sep, items = document["Fn::Join"]
        return sep.join(render(items, names))
    if set(document) == {"Fn::Split"}:
        sep, text = document["Fn::Split"]
        return render(text, names).split(sep)
    return {k: render(v, names) for k, v in document.items()}


def deploy(
    aws,
    stack: str,
    repository: str = "finetune",
    poll_seconds: float = 5.0,
    vpc: str | None = None,
    parameters: dict[str, str] | None = None,
) -> dict:
    """Create or update the stack and wait for it; returns its outputs. ``vpc``: the one VPC
    EC2 runs may use (default: the region's default VPC); ``parameters``: other template
    parameters (instance types, runtime, count), by name."""
    cfn = aws.client("cloudformation")
    given = {**(parameters or {}), "RepositoryName": repository}
    given["VpcId"] = vpc or given.get("VpcId") or default_vpc(aws)
    known = parameter_defaults()
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UsageError(
            f"the template has no parameter {', '.join(unknown)}",
            f"use one of: {', '.join(sorted(known))}.",
        )
    args: dict[str, Any] = dict(
        StackName=stack,
        TemplateBody=template_text(),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in sorted(given.items())],
        Capabilities=["CAPABILITY_NAMED_IAM"],  # the boundaries have fixed names
        Tags=[{"Key": "project", "Value": "finetune"}],
    )
    with aws_errors("CloudFormation", resource=stack, region=aws.region):
        if _exists(cfn, stack):
            try:
                retries.call(cfn.update_stack, **args)
            except Exception as exc:
                if "No updates are to be performed" not in str(exc):
                    raise
        else:
            retries.call(cfn.create_stack, **args)
        return _wait(cfn, stack, poll_seconds)


def default_vpc(aws) -> str:
    """The region's default VPC (where finetune launches when no --subnet is given)."""
    with aws_errors("DescribeVpcs", region=aws.region):
        found = retries.call(
            aws.client("ec2").describe_vpcs, Filters=[{"Name": "is-default", "Values": ["true"]}]
        )["Vpcs"]
    if not found:
        raise UsageError(
            f"{aws.region} has no default VPC, and the stack needs the VPC EC2 runs may use",
            "pass --vpc VPC_ID (the VPC whose subnets you will launch into).",
        )
    return found[0]["VpcId"]


def _exists(cfn, stack: str) -> bool:
    try:
        found = retries.call(cfn.describe_stacks, StackName=stack)["Stacks"]
    except Exception as exc:
        if "does not exist" in str(exc):
            return False
        raise
    return bool(found) and found[0]["StackStatus"] != "DELETE_COMPLETE"


def _wait(cfn, stack: str, poll_seconds: float) -> dict:
    while True:
        (desc,) = retries.call(cfn.describe_stacks, StackName=stack)["Stacks"]
        status = desc["StackStatus"]
        if status in DONE:
            return {o["OutputKey"]: o["OutputValue"] for o in desc.get("Outputs", [])}
        if any(word in status for word in FAILED):
            raise CloudError(
                f"stack {stack} ended {status}: {desc.get('StackStatusReason', 'no reason given')}",
                f"see the stack's events: `aws cloudformation describe-stack-events "
                f"--stack-name {stack}`; delete a failed first creation before deploying again.",
            )
        time.sleep(poll_seconds)


def env_lines(outputs: dict) -> list[str]:
    """The settings to export after a deploy."""
    pairs = (
        ("FINETUNE_REGION", "Region"),
        ("FINETUNE_BUCKET", "BucketName"),
    )
    return [f"export {var}={outputs[key]}" for var, key in pairs if key in outputs]
