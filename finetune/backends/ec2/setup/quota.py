"""The account's EC2 instance quota for a family, from Service Quotas: a zero quota is the most
common reason a first GPU launch fails, so the pre-flight reads it before anything is made.

EC2 counts running instances in vCPUs per quota class (G and VT, P, ..., on-demand and spot
apart). Quota codes as AWS's "Amazon EC2 Service Quotas" page lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.aws import retries

# family letter(s) -> (quota class, on-demand code, spot code)
_CLASSES = {
    "g": ("G and VT", "L-DB2E81BA", "L-3819A6DF"),
    "vt": ("G and VT", "L-DB2E81BA", "L-3819A6DF"),
    "p": ("P", "L-417A185B", "L-7212CCBC"),
    "inf": ("Inf", "L-1945791B", "L-B5D1601B"),
    "trn": ("Trn", "L-2C3B7624", "L-6B0D517C"),
}
_STANDARD = ("Standard (A, C, D, H, I, M, R, T, Z)", "L-1216C47A", "L-34B43A08")


@dataclass(frozen=True)
class Quota:
    name: str  # e.g. "Running On-Demand P instances"
    code: str
    vcpus: float | None  # None: could not be read (no permission, no such quota here)
    why_unknown: str = ""


def quota_class(instance_type: str, spot: bool) -> tuple[str, str]:
    """(quota name, quota code) that ``instance_type`` counts against."""
    family = instance_type.removeprefix("ml.").split(".", 1)[0].lower()
    head = next((k for k in sorted(_CLASSES, key=len, reverse=True) if family.startswith(k)), None)
    label, on_demand, spot_code = _CLASSES[head] if head else _STANDARD
    if spot:
        return f"All {label} Spot Instance Requests", spot_code
    return f"Running On-Demand {label} instances", on_demand


def read(client, instance_type: str, spot: bool) -> Quota:
    """The applied quota (vCPUs) for ``instance_type``'s class; unknown when it cannot be read."""
    name, code = quota_class(instance_type, spot)
    try:
        got = retries.call(client.get_service_quota, ServiceCode="ec2", QuotaCode=code)
    except Exception as exc:  # AccessDenied, NoSuchResource, no network: say so, don't guess
        why = retries.error_code(exc) or type(exc).__name__
        return Quota(name, code, None, why)
    return Quota(name, code, float(got["Quota"]["Value"]))


def quota_codes() -> list[str]:
    """Every quota code the pre-flight may read (the caller policy grants exactly these)."""
    rows = [*_CLASSES.values(), _STANDARD]
    return sorted({code for _, *codes in rows for code in codes})


def quota_arn(code: str, aws) -> str:
    """The Service Quotas ARN IAM authorizes GetServiceQuota on."""
    return f"arn:{aws.partition}:servicequotas:{aws.region}:{aws.account_id}:ec2/{code}"


def problem(quota: Quota, needed_vcpus: int, region: str) -> str | None:
    """Why the launch would be refused for this quota (None when it fits or is unknown)."""
    if quota.vcpus is None or quota.vcpus >= needed_vcpus:
        return None
    return (
        f"your EC2 quota '{quota.name}' in {region} is {quota.vcpus:g} vCPUs; this launch "
        f"needs {needed_vcpus}"
    )


def how_to_raise(quota: Quota, needed_vcpus: int, region: str) -> str:
    return (
        f"ask for at least {needed_vcpus} vCPUs: `aws service-quotas request-service-quota-"
        f"increase --service-code ec2 --quota-code {quota.code} --desired-value "
        f"{needed_vcpus} --region {region}` (or the Service Quotas console); new accounts "
        "start at 0 for GPU instances and approval can take a day."
    )
