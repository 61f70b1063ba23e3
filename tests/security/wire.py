"""IAM actions (and the S3 ARNs they act on) of the AWS requests a test recorded on the wire.

An API call can need more than its own action: RunInstances with an instance profile needs
iam:PassRole, tags given at creation need ec2:CreateTags (with ec2:CreateAction),
iam:TagRole or iam:TagInstanceProfile, and HeadObject needs s3:ListBucket to tell a missing
key (404) from a denied one. Those implied actions are added here, so "the policy grants
exactly what the code needs" holds.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs

_SERVICE_BY_VERSION = {
    "2016-11-15": "ec2",
    "2010-05-08": "iam",
    "2011-06-15": "sts",
    "2010-05-15": "cloudformation",
}
_SERVICE_BY_TARGET = {
    "AmazonSSM": "ssm",
    "AmazonEC2ContainerRegistry_V20150921": "ecr",
    "ServiceQuotasV20190624": "servicequotas",
}
_NO_PERMISSION = {"sts:GetCallerIdentity"}  # IAM needs no grant for it
_S3_IAM = {
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "DeleteObject": "s3:DeleteObject",
    "DeleteObjects": "s3:DeleteObject",
    "HeadObject": "s3:GetObject",
    "GetObject": "s3:GetObject",
    "ListObjectsV2": "s3:ListBucket",
    "GetBucketLocation": "s3:GetBucketLocation",
    "HeadBucket": "s3:ListBucket",
}


def query_actions(requests: list[dict]) -> set[str]:
    """IAM actions of the query-protocol (EC2, IAM, STS) and JSON-protocol (SSM, ECR)
    requests, implied ones too."""
    out = set()
    for r in requests:
        if "Action" in r and r.get("Version") in _SERVICE_BY_VERSION:
            out.add(f"{_SERVICE_BY_VERSION[r['Version']]}:{r['Action']}")
            if any(k.startswith("TagSpecification") for k in r):
                out.add("ec2:CreateTags")
            if r["Action"] == "RunInstances" and any(k.startswith("IamInstanceProfile") for k in r):
                out.add("iam:PassRole")
            if r["Action"] == "CreateRole" and any(k.startswith("Tags.") for k in r):
                out.add("iam:TagRole")
            if r["Action"] == "CreateInstanceProfile" and any(k.startswith("Tags.") for k in r):
                out.add("iam:TagInstanceProfile")
        elif r.get("Target", "").split(".")[0] in _SERVICE_BY_TARGET:
            service, _, action = r["Target"].partition(".")
            out.add(f"{_SERVICE_BY_TARGET[service]}:{action}")
    return out - _NO_PERMISSION


def s3_calls(http: list[tuple[str, str, str, str]]) -> list[tuple[str, str]]:
    """(IAM action, resource ARN) of each path-style S3 request recorded."""
    out = []
    for method, path, query, auth in http:
        if "/s3/aws4_request" not in auth:
            continue
        q = parse_qs(query, keep_blank_values=True)
        bucket, _, key = path.lstrip("/").partition("/")
        op = _s3_operation(method, bool(key), q)
        arn = f"arn:aws:s3:::{bucket}/{key}" if key else f"arn:aws:s3:::{bucket}"
        if op == "DeleteObjects":  # keys are in the body: the prefix is what matters here
            arn = f"arn:aws:s3:::{bucket}/*"
        out.append((_S3_IAM[op], arn))
        if op == "HeadObject":  # a missing key answers 404 (not 403) only with ListBucket
            out.append(("s3:ListBucket", f"arn:aws:s3:::{bucket}"))
    return out


def _s3_operation(method: str, has_key: bool, q: dict) -> str:
    if method == "PUT":
        return "UploadPart" if "partNumber" in q else "PutObject"
    if method == "POST":
        if "delete" in q:
            return "DeleteObjects"
        return "CreateMultipartUpload" if "uploads" in q else "CompleteMultipartUpload"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in q else "DeleteObject"
    if method == "HEAD":
        return "HeadObject" if has_key else "HeadBucket"
    if has_key:
        return "GetObject"
    return "GetBucketLocation" if "location" in q else "ListObjectsV2"


def statement_actions(policy: dict, effect: str = "Allow") -> set[str]:
    """Every action the policy's ``effect`` statements name."""
    out = set()
    for s in policy["Statement"]:
        if s["Effect"] == effect:
            out.update([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    return out


def is_wildcard_free(action: str) -> bool:
    return re.fullmatch(r"[a-z0-9-]+:[A-Za-z0-9]+", action) is not None
