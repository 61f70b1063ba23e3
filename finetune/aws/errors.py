"""AWS failures as messages a user can act on: what went wrong, and "To fix: ...".

``translate`` turns botocore's exceptions (ClientError, NoCredentialsError, ...) into a
CloudError subclass; ``aws_errors`` does it for a block of calls. Codes are matched, never
HTTP texts, and the original exception stays chained for --debug style tracebacks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from finetune.aws.retries import THROTTLING_CODES, error_code
from finetune.errors import CloudError, FinetuneError

_ASK_FOR_CREDENTIALS = (
    "run `aws configure` (access keys) or `aws sso login --profile NAME` and set "
    "FINETUNE_PROFILE=NAME; on EC2 or in CI attach an IAM role instead."
)
_CALLER_POLICY = (
    "attach the finetune caller policy to your IAM user or role "
    "(`finetune infra print --policy caller`), or ask your AWS administrator to."
)


class CredentialsError(CloudError):
    """No credentials, expired ones, or ones AWS does not recognise."""


class AccessError(CloudError):
    """AWS understood who we are and said no (IAM, bucket policy, missing role)."""


class QuotaError(CloudError):
    """An account-level service quota (ResourceLimitExceeded) blocks the request."""


class CapacityError(CloudError):
    """AWS has no capacity for the instance type right now."""


class ThrottledError(CloudError):
    """AWS kept throttling us after every retry."""


def translate(exc: Exception, action: str, resource: str = "", region: str = "") -> Exception:
    """The FinetuneError for ``exc`` raised by ``action`` (e.g. 'CreateTrainingJob') on
    ``resource`` (a bucket, a job name); ``exc`` itself if it is not an AWS failure."""
    if isinstance(exc, FinetuneError):
        return exc
    name = type(exc).__name__
    if name in _LOCAL_FAILURES:
        return _LOCAL_FAILURES[name](exc, region)
    code = error_code(exc)
    if not code:
        return exc
    message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", "")) or str(exc)
    attempts = getattr(exc, "finetune_attempts", 1)
    return _from_code(code, message, action, resource, region, attempts)


@contextmanager
def aws_errors(action: str, resource: str = "", region: str = "") -> Iterator[None]:
    """Run a block of AWS calls; botocore failures come out as CloudErrors with a fix."""
    try:
        yield
    except Exception as exc:
        translated = translate(exc, action, resource, region)
        if translated is exc:
            raise
        raise translated from exc


def _no_credentials(exc: BaseException, region: str) -> CloudError:
    return CredentialsError("No AWS credentials were found.", _ASK_FOR_CREDENTIALS)


def _sso_expired(exc: BaseException, region: str) -> CloudError:
    return CredentialsError(
        f"Your AWS SSO session has expired ({exc}).",
        "run `aws sso login --profile NAME` (the profile in FINETUNE_PROFILE or AWS_PROFILE).",
    )


def _no_profile(exc: BaseException, region: str) -> CloudError:
    return CredentialsError(
        f"The AWS profile is not configured ({exc}).",
        "set FINETUNE_PROFILE to one of `aws configure list-profiles`, or unset it.",
    )


def _no_region(exc: BaseException, region: str) -> CloudError:
    return CloudError(
        "No AWS region was chosen.",
        "pass --region (e.g. eu-west-1), set FINETUNE_REGION, or run "
        "`aws configure set region eu-west-1`.",
    )


def _unreachable(exc: BaseException, region: str) -> CloudError:
    return CloudError(
        f"AWS could not be reached ({exc}).",
        "check the network or proxy settings and the region name; if AWS_ENDPOINT_URL is set, "
        "check that it points where you mean.",
    )


_LOCAL_FAILURES = {
    "NoCredentialsError": _no_credentials,
    "PartialCredentialsError": _no_credentials,
    "CredentialRetrievalError": _no_credentials,
    "SSOTokenLoadError": _sso_expired,
    "UnauthorizedSSOTokenError": _sso_expired,
    "TokenRetrievalError": _sso_expired,
    "ProfileNotFound": _no_profile,
    "NoRegionError": _no_region,
    "EndpointConnectionError": _unreachable,
    "ConnectTimeoutError": _unreachable,
}

_EXPIRED = {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
_REJECTED = {
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "AuthFailure",
}
_DENIED = {"AccessDenied", "AccessDeniedException", "403", "Forbidden", "AllAccessDisabled"}


def _from_code(code, message, action, resource, region, attempts) -> CloudError:
    """The most specific message for an AWS error code, else a generic one."""
    where = f" on {resource}" if resource else ""
    found = _identity_or_access(code, message, action, where, resource, region)
    found = found or _service_refusal(code, message, action, where, resource, region, attempts)
    return found or CloudError(
        f"AWS {action}{where} failed: {code}: {message}",
        "run the command again if the failure looks transient; otherwise the message says what "
        "AWS objected to.",
    )


def _identity_or_access(code, message, action, where, resource, region) -> CloudError | None:
    """Who we are (credentials) and what we may touch (IAM, buckets, the execution role)."""
    if code in _EXPIRED:
        return CredentialsError(
            f"Your AWS credentials have expired ({code} from {action}).",
            "refresh them: `aws sso login --profile NAME`, or get new temporary credentials; "
            "if it keeps happening, check this machine's clock.",
        )
    if code in _REJECTED:
        what = f"AWS did not accept your credentials ({code})."
        return CredentialsError(what, _ASK_FOR_CREDENTIALS)
    if code in _DENIED:
        return AccessError(f"AWS denied {action}{where}: {message or code}", _CALLER_POLICY)
    if code == "NoSuchBucket":
        return AccessError(
            f"The S3 bucket {resource or '(unnamed)'} does not exist.",
            f"create it with `finetune infra deploy`, or set FINETUNE_BUCKET to an existing "
            f"bucket{' in ' + region if region else ''}.",
        )
    if code in ("ValidationException", "ValidationError") and _about_role(message):
        return missing_role(message)
    return None


def _service_refusal(code, message, action, where, resource, region, attempts):
    """Quotas, capacity, name clashes, throttling, invalid requests."""
    if code == "ResourceLimitExceeded":
        return _quota(message, action, region)
    if code == "ResourceInUse":
        return CloudError(
            f"A SageMaker training job named {resource or '(this name)'} already exists.",
            "job names are unique per account and region, forever: launch again (a new run "
            "gets a new name), or continue a run with `finetune launch --resume RUN`.",
        )
    if "Capacity" in code or ("Insufficient" in message and "capacity" in message.lower()):
        return capacity_error(message, region)
    if code in THROTTLING_CODES:
        return ThrottledError(
            f"AWS throttled {action}{where} ({code}) on all {attempts} attempts.",
            "wait a minute and run the command again; fewer finetune commands polling at once "
            "also helps.",
        )
    if code in ("ValidationException", "ValidationError"):
        return CloudError(
            f"AWS rejected {action}: {message}",
            "check the values `finetune launch ... --dry-run` shows; the message names the field.",
        )
    return None


def _about_role(message: str) -> bool:
    text = message.lower()
    return "role" in text and any(w in text for w in ("assume", "arn", "passrole", "not found"))


def missing_role(message: str) -> AccessError:
    """SageMaker cannot use the execution role (missing, wrong trust policy, no PassRole)."""
    return AccessError(
        f"SageMaker cannot use the execution role: {message}",
        "unset FINETUNE_ROLE_ARN to let finetune create a role for each run (attach the "
        "stack's CallerPolicyArn, `finetune infra deploy`); a role of your own must trust "
        "sagemaker.amazonaws.com and you need iam:PassRole on it.",
    )


_QUOTA_NAME = re.compile(r"service limit '([^']+)'")


def _quota(message: str, action: str, region: str) -> QuotaError:
    match = _QUOTA_NAME.search(message)
    quota = match.group(1) if match else "the SageMaker quota named in the message"
    where = region or "your region"
    return QuotaError(
        f"{action} hit a service quota: {message}",
        f"request an increase of '{quota}' for Amazon SageMaker in {where}: Service Quotas "
        "console > AWS services > Amazon SageMaker > search the quota name > Request increase; "
        f"or `aws service-quotas list-service-quotas --service-code sagemaker --region {where}` "
        "to find its quota code, then `aws service-quotas request-service-quota-increase "
        f"--service-code sagemaker --quota-code CODE --desired-value N --region {where}`. "
        "Meanwhile try another instance type or region.",
    )


def capacity_error(message: str, region: str = "", instance: str = "") -> CapacityError:
    """AWS had no capacity: a message that says what to try instead."""
    what = f" for {instance}" if instance else ""
    where = f" in {region}" if region else ""
    return CapacityError(
        f"AWS has no capacity{what}{where} right now: {message}",
        "run again later, pick another region (--region) or instance type (--instance), or "
        "use --spot with a longer --max-wait so SageMaker waits for capacity.",
    )
