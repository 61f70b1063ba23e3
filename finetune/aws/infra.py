"""The infra stack (infra/cloudformation.yaml): print it, print its policies as plain IAM JSON,
and deploy it with CloudFormation.

The template and policies/*.json ship inside the package (finetune/infra/; the repository's
infra/ links to them); a test keeps the policy files identical to the template's documents.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.errors import CloudError, DataError, UsageError

TEMPLATE = "cloudformation.yaml"
POLICIES = {
    "caller": "sagemaker-caller.json",
    "ec2-caller": "../ec2-caller-policy.json",
    "boundary": "run-boundary.json",
}
BOUNDARY_PATH = "/finetune/"
BOUNDARY_NAME = "finetune-run-boundary-{region}"  # the stack's RunBoundary, one per region
DONE = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS")
FAILED = ("FAILED", "ROLLBACK")


def boundary_arn(account: str, region: str) -> str:
    """The ARN of the stack's permissions boundary: every per-run role must carry it (the
    caller policies allow CreateRole and PutRolePolicy only with it)."""
    from finetune.aws.session import partition_of

    name = BOUNDARY_NAME.format(region=region)
    return f"arn:{partition_of(region)}:iam::{account}:policy{BOUNDARY_PATH}{name}"


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
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        """A region or bucket given (not a placeholder) is checked as FINETUNE_* are."""
        from finetune.settings.names import check_bucket, check_region

        if self.region != "REGION":
            check_region(self.region, "--region")
        if self.bucket != "BUCKET":
            check_bucket(self.bucket, "--bucket")

    def values(self) -> dict[str, str]:
        from finetune.aws.session import partition_of

        partition = partition_of(self.region) if self.region != "REGION" else "aws"
        return {
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
            "RunBoundary": (
                f"arn:{partition}:iam::{self.account}:policy{BOUNDARY_PATH}"
                + BOUNDARY_NAME.format(region=self.region)
            ),
            **self.extra,
        }


def render(document, names: Names):
    """``document`` with Fn::Sub, Fn::GetAtt and Ref replaced: a plain IAM policy."""
    values = names.values()
    if isinstance(document, list):
        return [render(item, names) for item in document]
    if not isinstance(document, dict):
        return document
    if set(document) == {"Fn::Sub"}:
        return re.sub(r"\$\{([^}]+)\}", lambda m: values[m.group(1)], document["Fn::Sub"])
    if set(document) == {"Fn::GetAtt"}:
        return values[".".join(document["Fn::GetAtt"])]
    if set(document) == {"Ref"}:
        return values[document["Ref"]]
    return {k: render(v, names) for k, v in document.items()}


def deploy(aws, stack: str, repository: str = "finetune", poll_seconds: float = 5.0) -> dict:
    """Create or update the stack and wait for it; returns its outputs."""
    cfn = aws.client("cloudformation")
    args = dict(
        StackName=stack,
        TemplateBody=template_text(),
        Parameters=[{"ParameterKey": "RepositoryName", "ParameterValue": repository}],
        Capabilities=["CAPABILITY_NAMED_IAM"],  # the boundary has a fixed name
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
