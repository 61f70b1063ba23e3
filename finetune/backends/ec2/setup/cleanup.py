"""`finetune cleanup`: what finetune left in EC2 and IAM that no live run owns.

Everything the EC2 backend creates carries the project tag and its own keys (finetune:run-id,
finetune:owner, ...) or the /finetune/ IAM path (per-run roles and instance profiles). The
caller says which runs are live (finetune.service.cleanup); anything else of finetune's older
than ``older_than`` seconds is an orphan, removed (instances terminated, open spot requests
cancelled, instance profiles and roles deleted) if it is the caller's: an instance or spot
request by its finetune:owner tag (the launching identity) or its run in this machine's ledger,
an instance profile (no owner tag to read) by the ledger only. The rest is returned with why
it is skipped (other users' and CI's runs are not in this ledger); a resource tagged
project=finetune without finetune:run-id is not finetune's at all (the generic key stays
because the caller policies' conditions use it).
"""

from __future__ import annotations

import time
from dataclasses import replace

from finetune.backends.base import CleanupScope, Orphan
from finetune.backends.ec2.request import OWNER_TAG, PROJECT_TAG, RUN_TAG
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.setup import profile as ec2_profile


def find_orphans(
    clients, live_runs: set[str], older_than_s: float, scope=CleanupScope(), now=None
) -> list[Orphan]:
    """Every finetune resource of the region that no live run owns, older than the limit;
    those outside ``scope`` carry the reason they are skipped."""
    now = now or time.time()
    found = _instances(clients, now) + _spot_requests(clients, now) + _profiles(clients, now)
    found += _run_groups(clients)
    # a group has no creation time: one of a run that is not live is an orphan at any age
    # (deleting one its instances still hold fails harmlessly, and the next cleanup retries)
    found = [
        o
        for o in found
        if o.run_id not in live_runs and (o.age_s >= older_than_s or o.kind == "security-group")
    ]
    me = None if scope.all_owners else scope.owner or ec2_infra.owner(clients("sts"))
    return [replace(o, skipped=_whose(o, me, scope.known_runs)) for o in found]


def _whose(o: Orphan, me: str | None, known_runs: frozenset[str]) -> str:
    """'' when ``o`` is the caller's to remove (``me`` None: anyone's), else why not."""
    if not o.run_id:
        return f"no {RUN_TAG} tag: not a finetune run's"
    if me is None or o.run_id in known_runs:
        return ""  # a run of this machine's ledger (that ended)
    if o.kind == "instance-profile":
        return "its run is not in this machine's ledger and IAM profiles carry no owner tag"
    if not o.owner:
        return f"no {OWNER_TAG} tag: its owner is unknown"
    return "" if o.owner == me else f"launched by {o.owner}, not {me}"


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
