"""Run roles that older finetune versions left at /finetune/ (`finetune infra check`).

Versions up to 1d38f95 created ``role/finetune/finetune-run-*`` and instance profiles of the
same name with no permissions boundary and AWS's Session Manager policy attached; later
ones created them there with the single run boundary. Run roles now live under
``/finetune-bounded/<backend>/`` (finetune.aws.infra.run_role_path), which the caller
policies' PassRole and ``ec2:InstanceProfile`` name, so none of these can be launched with
any more; they should still go. ListRoles does not return a role's boundary: GetRole does.
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.aws.infra import LEGACY_ROLE_PATH


@dataclass(frozen=True)
class LegacyRole:
    name: str
    arn: str
    boundary: str  # "" when the role has none
    attached: tuple[str, ...]  # managed policy ARNs
    inline: tuple[str, ...]  # inline policy names
    profiles: tuple[str, ...]  # instance profile names


def find(iam) -> list[LegacyRole]:
    """Every role under the old run-role path, those without a boundary first."""
    with aws_errors("ListRoles", resource=f"role{LEGACY_ROLE_PATH}"):
        pages = iam.get_paginator("list_roles").paginate(PathPrefix=LEGACY_ROLE_PATH)
        roles = [r for page in pages for r in page["Roles"]]
        found = [_describe(iam, r["RoleName"]) for r in roles]  # sub-paths matched the old ARNs too
    return sorted(found, key=lambda r: (bool(r.boundary), r.name))


def _describe(iam, name: str) -> LegacyRole:
    role = retries.call(iam.get_role, RoleName=name)["Role"]
    attached = retries.call(iam.list_attached_role_policies, RoleName=name)["AttachedPolicies"]
    inline = retries.call(iam.list_role_policies, RoleName=name)["PolicyNames"]
    profiles = retries.call(iam.list_instance_profiles_for_role, RoleName=name)
    return LegacyRole(
        name=name,
        arn=role["Arn"],
        boundary=(role.get("PermissionsBoundary") or {}).get("PermissionsBoundaryArn", ""),
        attached=tuple(p["PolicyArn"] for p in attached),
        inline=tuple(inline),
        profiles=tuple(p["InstanceProfileName"] for p in profiles["InstanceProfiles"]),
    )


def removal(role: LegacyRole) -> list[str]:
    """The AWS CLI commands that remove ``role`` and what holds it, in order."""
    n = role.name
    steps = [
        f"aws iam remove-role-from-instance-profile --instance-profile-name {p} --role-name {n}"
        for p in role.profiles
    ]
    steps += [f"aws iam delete-instance-profile --instance-profile-name {p}" for p in role.profiles]
    steps += [f"aws iam detach-role-policy --role-name {n} --policy-arn {a}" for a in role.attached]
    steps += [f"aws iam delete-role-policy --role-name {n} --policy-name {p}" for p in role.inline]
    return [*steps, f"aws iam delete-role --role-name {n}"]


def report(found: list[LegacyRole]) -> list[str]:
    """What `finetune infra check` prints: each role, how bad, and how to remove it."""
    unbounded = sum(1 for r in found if not r.boundary)
    lines = [
        f"{len(found)} run role(s) of older finetune versions at {LEGACY_ROLE_PATH}, "
        f"{unbounded} without a permissions boundary. The caller policies no longer pass them,",
        "but anyone allowed iam:PassRole on them could launch them: remove them "
        "(after their runs ended) with:",
    ]
    for role in found:
        how = f"boundary {role.boundary}" if role.boundary else "NO permissions boundary"
        extra = f"; managed policies: {', '.join(role.attached)}" if role.attached else ""
        lines += ["", f"  {role.arn}  ({how}{extra})"]
        lines += [f"    {step}" for step in removal(role)]
    return lines
