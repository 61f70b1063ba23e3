"""`finetune cleanup`: what finetune left in EC2 and IAM that no live run owns.

Everything the EC2 backend creates carries the project tag and its own keys (finetune:run-id,
finetune:owner, ...) or the run-role IAM path (per-run roles and instance profiles, tagged
with their owner too). The caller says which runs are live (finetune.service.cleanup);
anything else of finetune's older than ``older_than`` seconds -- at any age when this
machine's ledger knows its run ended -- is an orphan. It is removed (instances terminated,
open spot requests cancelled, profiles and roles deleted) only if it is this machine's: its
run in this ledger, or named by the caller (--run, --owner, --all-owners). The caller's own
identity is not enough: the same user launches from a laptop and a CI box, and a run unknown
here may be live there. The rest is returned with why it is skipped; a resource tagged
project=finetune without finetune:run-id is not finetune's at all.
"""

from __future__ import annotations

import time
from dataclasses import replace

from finetune.backends.base import CleanupScope, Orphan
from finetune.backends.ec2.request import OWNER_TAG, PROJECT_TAG, RUN_TAG
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.setup import profile as ec2_profile
from finetune.backends.ec2.setup.infra import error_code


def find_orphans(
    clients, live_runs: set[str], older_than_s: float, scope=CleanupScope(), now=None
) -> list[Orphan]:
    """Every finetune resource of the region that no live run owns, older than the limit
    (or of a run this ledger knows ended); those outside ``scope`` carry why they are
    skipped."""
    now = now or time.time()
    found = _instances(clients, now) + _spot_requests(clients, now) + _profiles(clients, now)
    found += _run_groups(clients)
    # a group has no creation time: one of a run that is not live is an orphan at any age
    # (deleting one its instances still hold fails harmlessly, and the next cleanup retries)
    found = [
        o
        for o in found
        if o.run_id not in live_runs
        and (o.age_s >= older_than_s or o.kind == "security-group" or o.run_id in scope.known_runs)
    ]
    me = "" if scope.all_owners else ec2_infra.owner(clients("sts"))
    found = [_with_owner(clients, o, scope) for o in found]
    return [replace(o, skipped=_whose(o, me, scope)) for o in found]


def _whose(o: Orphan, me: str, scope: CleanupScope) -> str:
    """'' when ``o`` is the caller's to remove, else why not."""
    if not o.run_id:
        return f"no {RUN_TAG} tag: not a finetune run's"
    if scope.all_owners or o.run_id in scope.known_runs or o.run_id in scope.runs:
        return ""  # everyone's; a run of this machine's ledger (that ended); one named
    if not o.owner:
        if o.kind == "instance-profile":
            return "its run is not in this machine's ledger and IAM profiles carry no owner tag"
        return f"no {OWNER_TAG} tag: its owner is unknown"
    if scope.owner is not None:  # --owner NAME: that owner's, wherever launched
        return "" if o.owner == scope.owner else f"launched by {o.owner}, not {scope.owner}"
    if o.owner != me:
        return f"launched by {o.owner}, not {me}"
    return (
        f"launched by you ({me}) but not from this machine (its run is not in this ledger): "
        f"it may be live there; --run {o.run_id} if it is not"
    )


def _with_owner(clients, o: Orphan, scope: CleanupScope) -> Orphan:
    """An instance profile with its owner tag (ListInstanceProfiles returns no tags), where
    the ledger alone does not make it the caller's."""
    if o.kind != "instance-profile" or scope.all_owners or o.run_id in scope.known_runs:
        return o
    iam = clients("iam")
    try:
        profile = ec2_infra.call(iam.get_instance_profile, InstanceProfileName=o.id)
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":  # gone since it was listed
            return o
        raise ec2_infra.cloud_error(exc, f"GetInstanceProfile {o.id}") from None
    return replace(o, owner=_tags(profile["InstanceProfile"]).get(OWNER_TAG, ""))


def remove(clients, orphans: list[Orphan]) -> list[str]:
    """Terminate, cancel and delete the orphans; returns one line per action."""
    done = []
    ec2 = clients("ec2")
    instances = [o.id for o in orphans if o.kind == "instance"]
    ec2_infra.terminate(ec2, instances)
    done += [f"terminated {i}" for i in instances]
    requests = [o.id for o in orphans if o.kind == "spot-request"]
    if requests:
        ec2_infra.call(ec2.cancel_spot_instance_requests, SpotInstanceRequestIds=requests)
        done += [f"cancelled spot request {r}" for r in requests]
    for o in orphans:
        if o.kind == "security-group" and _delete_group(ec2, o.id):
            done.append(f"deleted security group {o.id} ({o.detail})")
        if o.kind == "instance-profile":
            ec2_profile.delete_instance_profile(clients("iam"), o.id)
            done.append(f"deleted instance profile and role {o.id}")
    return done


def _tags(item: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags", [])}


def _age(value, now: float) -> float:
    return now - value.timestamp() if hasattr(value, "timestamp") else 0.0


def _instances(clients, now: float) -> list[Orphan]:
    out = []
    for inst in ec2_infra.find_instances(clients("ec2")):
        tags = _tags(inst)
        detail = f"{inst['InstanceType']} {inst['State']['Name']}"
        age = _age(inst.get("LaunchTime"), now)
        run, owner = tags.get(RUN_TAG, ""), tags.get(OWNER_TAG, "")
        out.append(Orphan("instance", inst["InstanceId"], run, age, detail, owner))
    return out


def _spot_requests(clients, now: float) -> list[Orphan]:
    ec2 = clients("ec2")
    filters = [
        {"Name": f"tag:{PROJECT_TAG[0]}", "Values": [PROJECT_TAG[1]]},
        {"Name": "state", "Values": ["open", "active"]},
    ]
    try:
        reqs = ec2_infra.call(ec2.describe_spot_instance_requests, Filters=filters)
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, "DescribeSpotInstanceRequests") from None
    return [
        Orphan(
            "spot-request",
            r["SpotInstanceRequestId"],
            _tags(r).get(RUN_TAG, ""),
            _age(r.get("CreateTime"), now),
            r.get("State", ""),
            _tags(r).get(OWNER_TAG, ""),
        )
        for r in reqs.get("SpotInstanceRequests", [])
    ]


def _profiles(clients, now: float) -> list[Orphan]:
    iam = clients("iam")
    prefix = ec2_profile.profile_name("")
    out, marker = [], None
    while True:
        kwargs = {"PathPrefix": ec2_profile.ROLE_PATH, **({"Marker": marker} if marker else {})}
        try:
            page = ec2_infra.call(iam.list_instance_profiles, **kwargs)
        except Exception as exc:
            raise ec2_infra.cloud_error(exc, "ListInstanceProfiles") from None
        for prof in page["InstanceProfiles"]:
            name = prof["InstanceProfileName"]
            if name.startswith(prefix):
                age = _age(prof.get("CreateDate"), now)
                out.append(Orphan("instance-profile", name, name[len(prefix) :], age))
        marker = page.get("Marker")
        if not page.get("IsTruncated"):
            return out


def _run_groups(clients) -> list[Orphan]:
    """The per-run cluster groups (tagged with a run id) left by multi-host runs."""
    ec2 = clients("ec2")
    flt = [
        {"Name": f"tag:{PROJECT_TAG[0]}", "Values": [PROJECT_TAG[1]]},
        {"Name": "tag-key", "Values": [RUN_TAG]},
    ]
    try:
        groups = ec2_infra.call(ec2.describe_security_groups, Filters=flt)["SecurityGroups"]
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, "DescribeSecurityGroups") from None
    return [
        Orphan("security-group", g["GroupId"], _tags(g).get(RUN_TAG, ""), 0.0, g["GroupName"])
        for g in groups
    ]


def _delete_group(ec2, group_id: str) -> bool:
    """False when instances still hold the group (terminating): the next cleanup retries."""
    try:
        ec2_infra.call(ec2.delete_security_group, GroupId=group_id)
    except Exception as exc:
        if ec2_infra.error_code(exc) in ("DependencyViolation", "InvalidGroup.NotFound"):
            return False
        raise ec2_infra.cloud_error(exc, f"deleting security group {group_id}") from None
    return True
