"""Multi-host EC2 runs: the cluster's security group, host names and the hosts map in S3.

One attempt of an N-host run is one RunInstances of N instances. Host ``algo-K`` is the
instance with AmiLaunchIndex K-1 (tagged finetune:host=algo-K). Once launched, the control
side writes ``hosts.json`` to the run's prefix -- ``{"attempt": n, "hosts": {"algo-1": ip,
...}, "instances": {instance_id: "algo-1", ...}}`` -- and every agent waits for it to build its
resourceconfig.json and reach the first host (the parameter-server scheduler).

The hosts talk to each other on the parameter-server ports (MXNet's kvstore unpickles what
it gets; torch's TCPStore has no authentication), so each multi-host run gets its own group
allowing all TCP from itself (the group as source, never a CIDR), deleted with the run;
single-host runs share a group without any inbound rule.
"""

from __future__ import annotations

import json
import secrets
from functools import partial

from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.instances import status as ec2_observe
from finetune.backends.ec2.request import HOST_TAG, OWNER_ID_TAG, PROJECT_TAG, RUN_TAG
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.errors import CloudError

CLUSTER_GROUP = "finetune-cluster-{run_id}"  # one per run: no other run's host is inside
SELF_RULE_PORTS = (0, 65535)
RULES_TAG = ("finetune:rules", "open")  # while set, the caller policy allows adding rules


def host_name(index: int) -> str:
    return f"algo-{index + 1}"


def cluster_group(ec2, vpc_id: str, run_id: str, owner_id: str) -> str:
    """The run's own group for its hosts: TCP from itself only, no ingress from anywhere.
    Born with the finetune:rules=open tag (the only state in which the caller policy lets
    rules be added), given its one self-referencing rule, then sealed by removing the tag:
    the policy launches only sealed groups, and nothing can reopen one. It carries its
    maker's aws:userid (finetune:owner-id; the policy lets no one set another's) and is
    adopted only with both this run's id and that owner id, never by its name: a relaunch
    from another session, or a name someone else took first, gets a group of its own."""
    name = CLUSTER_GROUP.format(run_id=run_id)
    try:
        group = _own(ec2, vpc_id, run_id, owner_id)
        for candidate in (name, f"{name}-{secrets.token_hex(4)}"):
            if group is not None:
                break
            make = partial(_create_cluster_group, ec2, vpc_id, run_id, candidate, owner_id)
            group = ec2_infra.create_group(ec2, make) or _own(ec2, vpc_id, run_id, owner_id)
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"the security group {name} in {vpc_id}") from None
    if group is None:
        raise CloudError(
            f"EC2 refused to create a security group for run {run_id} in {vpc_id} under any "
            "free name",
            "wait a minute and run the command again.",
        )
    gid, rules = group["GroupId"], group.get("IpPermissions") or []
    if any(not _self_rule(r, gid) for r in rules):
        raise CloudError(
            f"security group {gid} ({name}) has inbound rules other than TCP from itself",
            "remove them: finetune hosts accept traffic only from each other (use Session "
            "Manager for access).",
        )
    try:
        if not rules:
            rule = {"IpProtocol": "tcp", "FromPort": SELF_RULE_PORTS[0]}
            rule["ToPort"] = SELF_RULE_PORTS[1]
            rule["UserIdGroupPairs"] = [{"GroupId": gid, "Description": "finetune hosts"}]
            ec2_infra.call(ec2.authorize_security_group_ingress, GroupId=gid, IpPermissions=[rule])
        if RULES_TAG[0] in {t["Key"] for t in group.get("Tags", [])}:
            ec2_infra.call(ec2.delete_tags, Resources=[gid], Tags=[{"Key": RULES_TAG[0]}])
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"allowing TCP within {gid}") from None
    return gid


def _own(ec2, vpc_id: str, run_id: str, owner_id: str) -> dict | None:
    """The run's group in ``vpc_id`` that ``owner_id`` made: project, run id and owner id."""
    tags = {PROJECT_TAG[0]: PROJECT_TAG[1], RUN_TAG: run_id, OWNER_ID_TAG: owner_id}
    flt = [{"Name": "vpc-id", "Values": [vpc_id]}]
    flt += [{"Name": f"tag:{k}", "Values": [v]} for k, v in tags.items()]
    groups = ec2_infra.call(ec2.describe_security_groups, Filters=flt)["SecurityGroups"]
    mine = [g for g in groups if all(ec2_infra.tag(g, k) == v for k, v in tags.items())]
    return min(mine, key=lambda g: g["GroupId"]) if mine else None


def _create_cluster_group(ec2, vpc_id: str, run_id: str, name: str, owner_id: str) -> dict:
    pairs = [PROJECT_TAG, (RUN_TAG, run_id), (OWNER_ID_TAG, owner_id), RULES_TAG]
    tags = [{"Key": k, "Value": v} for k, v in pairs]
    gid = ec2.create_security_group(
        GroupName=name,
        Description=f"finetune run {run_id}: TCP between its hosts only",
        VpcId=vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )["GroupId"]
    return {"GroupId": gid, "IpPermissions": [], "Tags": tags}


def delete_cluster_groups(ec2, run_id: str) -> list[str]:
    """Delete the run's cluster groups (one per VPC it launched in); a group its instances
    still hold (they are terminating) stays for `finetune cleanup`. Returns those deleted."""
    flt = [
        {"Name": f"tag:{PROJECT_TAG[0]}", "Values": [PROJECT_TAG[1]]},
        {"Name": f"tag:{RUN_TAG}", "Values": [run_id]},
    ]
    try:
        groups = ec2_infra.call(ec2.describe_security_groups, Filters=flt)["SecurityGroups"]
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"finding the security groups of {run_id}") from None
    deleted = []
    for group in groups:
        try:
            ec2_infra.call(ec2.delete_security_group, GroupId=group["GroupId"])
            deleted.append(group["GroupId"])
        except Exception as exc:
            if ec2_infra.error_code(exc) not in ("DependencyViolation", "InvalidGroup.NotFound"):
                raise ec2_infra.cloud_error(exc, f"deleting {group['GroupId']}") from None
    return deleted


def _self_rule(rule: dict, gid: str) -> bool:
    pairs = rule.get("UserIdGroupPairs") or []
    return (
        rule.get("IpProtocol") == "tcp"
        and not rule.get("IpRanges")
        and not rule.get("Ipv6Ranges")
        and not rule.get("PrefixListIds")
        and bool(pairs)
        and all(pair.get("GroupId") == gid for pair in pairs)
    )


def publish(ec2, s3, bucket: str, prefix: str, attempt: int, instances: list[dict]) -> dict:
    """Tag each host with its name and write hosts.json (private IPs; described if missing)."""
    ids = [i["InstanceId"] for i in instances]
    if any(not i.get("PrivateIpAddress") for i in instances):
        described = ec2_infra.describe(ec2, ids)
        instances = [described.get(i["InstanceId"], i) for i in instances]
    hosts: dict[str, str] = {}  # host name -> private IP
    names: dict[str, str] = {}  # instance id -> host name
    doc = {"attempt": attempt, "hosts": hosts, "instances": names}
    for k, inst in enumerate(instances):
        name, ip = host_name(k), inst.get("PrivateIpAddress")
        if not ip:
            raise CloudError(
                f"instance {inst['InstanceId']} ({name}) has no private IP address",
                "use subnets of a VPC (--subnet); then `finetune launch --resume RUN_ID`.",
            )
        hosts[name], names[inst["InstanceId"]] = ip, name
        # with the project tag: the caller policy lets CreateTags touch finetune's own
        # instances only, and only with project=finetune in the request
        tag = [{"Key": PROJECT_TAG[0], "Value": PROJECT_TAG[1]}, {"Key": HOST_TAG, "Value": name}]
        ec2_infra.call(ec2.create_tags, Resources=[inst["InstanceId"]], Tags=tag)
    body = json.dumps(doc).encode()
    try:
        ec2_infra.call(s3.put_object, Bucket=bucket, Key=prefix + p.HOSTS, Body=body)
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"writing s3://{bucket}/{prefix}{p.HOSTS}") from None
    return doc


def observe_all(doc: dict, insts: list[dict | None], stop_requested: bool):
    """(outcome, reason, spot) of an attempt from host 1's status and every host's instance:
    one host ending ends the attempt for all (a parameter-server cluster cannot lose a host)."""
    outcome, reason = ec2_observe.observe(doc, insts[0], stop_requested)
    if outcome is not None or len(insts) < 2:
        return outcome, reason, ec2_observe.spot_interruption(doc, insts[0])
    for k, inst in enumerate(insts[1:], start=1):
        if inst is not None and inst["State"]["Name"] not in ec2_observe.ENDED:
            continue
        outcome, reason = ec2_observe.observe({}, inst, stop_requested)
        where = f"host {host_name(k)} ({(inst or {}).get('InstanceId', 'gone')})"
        return outcome, f"{where}: {reason}", ec2_observe.spot_interruption({}, inst)
    return None, None, False
