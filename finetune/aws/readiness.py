"""Whether this machine and an AWS account are ready for a cloud run (`finetune check`), as
`sky check` reports clouds: each item ok, missing (with its fix) or unknown (it could not be
read, and why). Every item asks AWS one cheap read-only question; nothing is created.

The items every cloud backend shares live here (credentials, region, bucket, image, run role,
a Service Quotas value); each backend picks its own (``readiness`` on the backend) and the
service (finetune.service.readiness) asks them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from finetune.aws import imageref, retries
from finetune.aws.session import configured_region, connect
from finetune.errors import FinetuneError

OK, MISSING, UNKNOWN = "ok", "missing", "unknown"


@dataclass(frozen=True)
class Item:
    """One readiness item: ``status`` ok | missing | unknown; ``fix`` what to do when not ok."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def permission_fix(code: str, need: str) -> str:
    """The fix of an item AWS would not let us read: exactly the permission it takes (which
    the stack's caller policies grant), or, for another failure, to look again."""
    if "AccessDenied" in code or code in ("UnauthorizedOperation", "403"):
        return (
            f"this needs {need}; the stack's caller policies grant it since this version: "
            "run `finetune infra deploy` again (or ask an administrator for it)."
        )
    return f"try again later, or look it up in the AWS console (reading it takes {need})."


def _failed(name: str, exc: FinetuneError, status: str = MISSING) -> Item:
    return Item(name, status, exc.what, exc.fix or "")


def region(given: str | None) -> Item:
    """The region a cloud command would use (--region, FINETUNE_REGION, the AWS config)."""
    try:
        found = configured_region(given)
    except FinetuneError as exc:  # a --region that is no AWS region
        return _failed("region", exc)
    if not found:
        return Item(
            "region",
            MISSING,
            "no AWS region is set",
            "pass --region REGION, or `finetune config set region REGION` (or FINETUNE_REGION).",
        )
    return Item("region", OK, found)


def credentials(given_region: str | None) -> tuple[Item, Any]:
    """STS GetCallerIdentity (needs no permission): (the item, the session or None)."""
    try:
        aws = connect(configured_region(given_region) or "us-east-1")
        who = aws.identity()
    except FinetuneError as exc:
        return _failed("credentials", exc), None
    return Item("credentials", OK, f"{who['Arn']} (account {who['Account']})"), aws


def bucket(aws, name: str | None) -> Item:
    """The bucket is set, exists, this caller may use it, and it is in the session's region."""
    if not name:
        return Item(
            "bucket",
            MISSING,
            "no S3 bucket is set (datasets, checkpoints and results go there)",
            "deploy the stack with `finetune infra deploy`, then `finetune config set bucket "
            "NAME` with its BucketName output.",
        )
    try:
        got = retries.call(aws.client("s3").head_bucket, Bucket=name)
    except Exception as exc:
        code = retries.error_code(exc) or type(exc).__name__
        if code in ("404", "NoSuchBucket", "NotFound"):
            what, fix = "does not exist", "create it with `finetune infra deploy`, or set another."
        elif code in ("403", "AccessDenied", "Forbidden"):
            what, fix = "is not readable with these credentials", "use a bucket of this account."
        else:
            return Item("bucket", UNKNOWN, f"{name}: could not be read ({code})", "try again.")
        return Item("bucket", MISSING, f"{name} {what}", fix)
    headers = got.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    where = headers.get("x-amz-bucket-region") or aws.region
    if where != aws.region:
        return Item(
            "bucket",
            MISSING,
            f"{name} is in {where}, not in {aws.region}",
            f"run in {where} (--region {where}), or set a bucket in {aws.region}.",
        )
    return Item("bucket", OK, f"{name} ({where})")


def image(aws, uri: str | None, needed: bool, why: str) -> Item:
    """Our training image: set and present in ECR. ``needed``: a launch of this backend
    cannot go without it (else its absence is ok, with ``why`` it is not needed)."""
    if not uri:
        if not needed:
            return Item("image", OK, f"not set: {why}")
        return Item(
            "image",
            MISSING,
            f"no training image is set ({why})",
            "run `finetune image push`, then `finetune config set image URI` with the URI it "
            "prints.",
        )
    try:
        imageref.pin(aws.client("ecr"), uri, aws.account_id, aws.region)
    except imageref.ImageMissing:
        return Item("image", MISSING, f"{uri} is not in ECR", "push it: `finetune image push`.")
    except FinetuneError as exc:
        return _failed("image", exc, UNKNOWN)
    except Exception as exc:
        code = retries.error_code(exc) or type(exc).__name__
        return Item("image", UNKNOWN, f"{uri}: could not be read ({code})", "try again.")
    return Item("image", OK, uri)


def run_role(aws, role_arn: str | None, boundary: str) -> Item:
    """The role runs get: ``role_arn`` when one is set (it must exist), else the one finetune
    creates for each run, which needs the stack's permissions ``boundary`` policy."""
    iam = aws.client("iam")
    kwargs: dict[str, Any]  # the IAM call's arguments
    if role_arn:
        name = role_arn.rsplit("/", 1)[-1]
        what, call, kwargs = f"the role {role_arn}", iam.get_role, {"RoleName": name}
    else:
        what, call, kwargs = (
            f"the permissions boundary {boundary}",
            iam.get_policy,
            {"PolicyArn": boundary},
        )
    try:
        retries.call(call, **kwargs)
    except Exception as exc:
        code = retries.error_code(exc) or type(exc).__name__
        if code != "NoSuchEntity":
            need = f"iam:GetRole on {role_arn}" if role_arn else f"iam:GetPolicy on {boundary}"
            return Item("run role", UNKNOWN, f"{what} could not be read ({code})",
                        permission_fix(code, need))  # fmt: skip
        fix = (
            "create it, or unset FINETUNE_ROLE_ARN (finetune then creates a role per run)."
            if role_arn
            else f"deploy the stack in {aws.region}: `finetune infra deploy --region {aws.region}`."
        )
        return Item("run role", MISSING, f"{what} does not exist", fix)
    if role_arn:
        return Item("run role", OK, f"{role_arn} (FINETUNE_ROLE_ARN)")
    return Item("run role", OK, f"one per run, bounded by {boundary.rsplit('/', 1)[-1]}")


def quota(
    name: str, value: float | None, needed: float, unit: str, why: str, fix: str, need: str
) -> Item:
    """A Service Quotas value against what one run of the chosen instance needs; ``value``
    None: it could not be read (``why``; ``need``: the permission that reads it)."""
    item = "GPU quota"
    if value is None:
        return Item(item, UNKNOWN, f"{name}: not readable ({why})", permission_fix(why, need))
    detail = f"{name}: {value:g} {unit}; one instance needs {needed:g}"
    if value < needed:
        return Item(item, MISSING, detail, fix)
    return Item(item, OK, detail)
