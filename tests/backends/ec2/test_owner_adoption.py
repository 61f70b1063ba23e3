"""Issue 49, S5-1 and S5-2, replayed in the code against moto: finetune adopts an existing
cluster group or a live instance only when both its run id and its owner id
(finetune:owner-id, the aws:userid the caller policy lets no one else set) are its own.

- S5-1: a group planted under the run's group name with the victim's owner id and no run id
  (and one with the run's id and another owner) is neither adopted, given a rule nor sealed;
  the run gets a group of its own, and its instances carry its owner id.
- S5-2: an instance another caller tagged with the victim's run and next attempt is not
  taken for that attempt: the relaunch calls RunInstances and runs on its own instance.
"""

from __future__ import annotations

import boto3

from finetune.backends.ec2.instances.hosts import CLUSTER_GROUP, cluster_group
from finetune.backends.ec2.options import Ec2Options

from .conftest import REGION, stand_in_ami
from .control import agent_says, instances_of, launch, sync, terminate

RUN = "ft-20261128-101500-a3f9"
BOB = "AROAEXAMPLEBOB:bob"


def _ec2():
    return boto3.client("ec2", region_name=REGION)


def _me() -> str:
    return boto3.client("sts", region_name=REGION).get_caller_identity()["UserId"]


def _tags(resource: dict) -> dict:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def _plant_group(vpc: str, name: str, **tags: str) -> str:
    pairs = {"project": "finetune", "finetune:rules": "open", **tags}
    spec = [{"ResourceType": "security-group",
             "Tags": [{"Key": k, "Value": v} for k, v in pairs.items()]}]  # fmt: skip
    return _ec2().create_security_group(
        GroupName=name, Description="planted", VpcId=vpc, TagSpecifications=spec
    )["GroupId"]


def test_s5_1_a_planted_group_is_not_adopted(ec2_aws):
    ec2 = _ec2()
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    me = _me()
    planted = _plant_group(vpc, CLUSTER_GROUP.format(run_id=RUN), **{"finetune:owner-id": me})
    gid = cluster_group(ec2, vpc, RUN, me)
    assert gid != planted
    (theirs,) = ec2.describe_security_groups(GroupIds=[planted])["SecurityGroups"]
    assert theirs["IpPermissions"] == [] and _tags(theirs)["finetune:rules"] == "open"
    (mine,) = ec2.describe_security_groups(GroupIds=[gid])["SecurityGroups"]
    tags = _tags(mine)
    assert tags["finetune:run-id"] == RUN and tags["finetune:owner-id"] == me
    assert "finetune:rules" not in tags  # sealed, with its one self rule
    (rule,) = mine["IpPermissions"]
    assert [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [gid]
    assert cluster_group(ec2, vpc, RUN, me) == gid  # its own group, found again by its tags


def test_s5_1_another_owners_group_of_the_run_is_not_adopted(ec2_aws):
    ec2 = _ec2()
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    tags = {"finetune:run-id": RUN, "finetune:owner-id": BOB}
    planted = _plant_group(vpc, CLUSTER_GROUP.format(run_id=RUN), **tags)
    gid = cluster_group(ec2, vpc, RUN, _me())
    assert gid != planted
    (theirs,) = ec2.describe_security_groups(GroupIds=[planted])["SecurityGroups"]
    assert theirs["IpPermissions"] == [] and "finetune:rules" in _tags(theirs)


def _plant_instance(run_id: str, attempt: int, owner_id: str | None) -> str:
    tags = {"project": "finetune", "finetune:run-id": run_id, "finetune:attempt": str(attempt)}
    if owner_id:
        tags["finetune:owner-id"] = owner_id
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    ami = stand_in_ami(_ec2())
    inst = _ec2().run_instances(ImageId=ami, MinCount=1, MaxCount=1, InstanceType="g5.xlarge",
                                TagSpecifications=spec)  # fmt: skip
    return inst["Instances"][0]["InstanceId"]


def test_s5_2_a_planted_instance_is_not_taken_for_the_next_attempt(ec2_aws, tiny_dataset, tmp_path):
    run, backend, ledger = launch(tmp_path, tiny_dataset, Ec2Options(max_restarts=2))
    (first,) = instances_of(run.id)
    assert _tags(first)["finetune:owner-id"] == _me()  # what the policy compares with
    planted = [_plant_instance(run.id, 2, BOB), _plant_instance(run.id, 2, None)]
    try:
        before = len(ec2_aws.sent("RunInstances"))  # the launch's and the two plants'
        agent_says(run.id, "interrupted", 1, reason="spot interruption notice", interruption="spot")
        run, status, _ = sync(run, backend, ledger)
        assert len(ec2_aws.sent("RunInstances")) == before + 1, status  # the relaunch launched
        assert run.backend_ref not in planted and run.backend_ref != first["InstanceId"]
        (ours,) = [i for i in instances_of(run.id) if i["InstanceId"] == run.backend_ref]
        assert _tags(ours)["finetune:attempt"] == "2"
        assert _tags(ours)["finetune:owner-id"] == _me()
    finally:
        for instance_id in planted:
            terminate(instance_id)
        backend.stop(ledger.get(run.id))
