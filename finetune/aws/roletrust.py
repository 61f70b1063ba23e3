"""Who may assume the run roles under /finetune-bounded/ (`finetune infra check`).

The caller policies let a caller create run roles only with its backend's permissions
boundary, but IAM has no condition key on a new role's trust policy: a caller can mint a role
under /finetune-bounded/ that trusts itself, another account, or an OIDC/SAML provider (GitHub
Actions, EKS) and use the boundary's reach from anywhere. The run-role perimeter (an RCP) stops
that where an organization attaches it; this audit finds such roles wherever it does not.

A run role's trust may name only its backend's service (``ec2.amazonaws.com`` under
``/finetune-bounded/ec2/``, ``sagemaker.amazonaws.com`` under ``/finetune-bounded/sagemaker/``)
for ``sts:AssumeRole``, and an ``aws:SourceAccount`` condition, where present, only this
account: what finetune itself creates.
"""

from __future__ import annotations

import json
import shlex
import urllib.parse
from dataclasses import dataclass

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.aws.infra import BOUNDARIES, RUN_ROLE_ROOT

SERVICE = "{kind}.amazonaws.com"


@dataclass(frozen=True)
class BadTrust:
    name: str
    arn: str
    problems: tuple[str, ...]
    fix: str  # the trust policy the role should have, as JSON


def find(iam, account: str) -> list[BadTrust]:
    """Every role under /finetune-bounded/ whose trust lets anyone but its service in."""
    with aws_errors("ListRoles", resource=f"role{RUN_ROLE_ROOT}"):
        pages = iam.get_paginator("list_roles").paginate(PathPrefix=RUN_ROLE_ROOT)
        roles = [r for page in pages for r in page["Roles"]]
        found = []
        for r in roles:
            role = retries.call(iam.get_role, RoleName=r["RoleName"])["Role"]
            bad = audit(role, account)
            if bad:
                found.append(bad)
    return sorted(found, key=lambda b: b.name)


def audit(role: dict, account: str) -> BadTrust | None:
    """What is wrong with ``role``'s trust (a GetRole ``Role``), or None."""
    kind = role.get("Path", "").removeprefix(RUN_ROLE_ROOT).split("/")[0]
    doc = role.get("AssumeRolePolicyDocument") or {}
    if isinstance(doc, str):  # the API sends it URL-encoded; botocore usually decodes it
        doc = json.loads(urllib.parse.unquote(doc))
    problems = []
    if kind not in BOUNDARIES:
        problems.append(f"its path {role.get('Path')} is no backend's run-role path")
        service = None
    else:
        service = SERVICE.format(kind=kind)
    statements = doc.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    for s in statements:
        if s.get("Effect") != "Allow":
            continue
        problems += _statement_problems(s, service, account)
    if not problems:
        return None
    want = service or SERVICE.format(kind="sagemaker")
    return BadTrust(
        role["RoleName"], role["Arn"], tuple(problems), json.dumps(_trust(want, account))
    )


def _statement_problems(s: dict, service: str | None, account: str) -> list[str]:
    out = []
    if "NotPrincipal" in s or "NotAction" in s:
        out.append("a statement uses NotPrincipal or NotAction (it trusts nearly everyone)")
    principal = s.get("Principal", {})
    if principal == "*" or not isinstance(principal, dict):
        out.append("it trusts every principal (*)")
        principal = {}
    for kind, values in principal.items():
        values = values if isinstance(values, list) else [values]
        for v in values:
            if kind == "Service" and service and v in (service, f"{service}.cn"):
                continue
            what = {
                "AWS": "an IAM principal or account",
                "Federated": "an identity provider (OIDC/SAML: AssumeRoleWithWebIdentity/SAML)",
                "Service": "another service",
            }.get(kind, kind)
            out.append(f"it trusts {what}: {v}")
    actions = s.get("Action", [])
    for a in actions if isinstance(actions, list) else [actions]:
        if a.lower() != "sts:assumerole":
            out.append(f"it allows {a}")
    for op, block in (s.get("Condition") or {}).items():
        for key, values in block.items():
            if key.lower() != "aws:sourceaccount":
                continue
            values = values if isinstance(values, list) else [values]
            foreign = [v for v in values if v != account]
            if foreign:
                out.append(f"its {op} aws:SourceAccount names another account: {foreign}")
    return out


def _trust(service: str, account: str) -> dict:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"aws:SourceAccount": account}},
            }
        ],
    }


def report(found: list[BadTrust]) -> list[str]:
    """What `finetune infra check` prints for roles whose trust is wrong, and the fix."""
    lines = [
        f"{len(found)} run role(s) under {RUN_ROLE_ROOT} trust more than their AWS service: "
        "whoever they trust holds a run boundary's reach from anywhere.",
        "To fix: after checking who made them (CloudTrail CreateRole), give each its "
        "service's trust, or delete it; and ask an administrator to attach "
        "infra/policies/run-role-perimeter.json as a resource control policy:",
    ]
    for bad in found:
        lines += ["", f"  {bad.arn}"]
        lines += [f"    - {p}" for p in bad.problems]
        lines.append(
            f"    aws iam update-assume-role-policy --role-name {bad.name} "
            f"--policy-document {shlex.quote(bad.fix)}"
        )
    return lines
