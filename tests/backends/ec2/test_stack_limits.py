"""Issue 23, findings 3, 8 and 12 on the wire: the stack's parameters refuse a launch before
anything is made, naming the parameter; EC2 runs land in the stack's VPC; every multi-host
run gets its own sealed cluster group, gone with the run.

The stack is the real template, deployed into moto by `finetune infra deploy`'s library
call; the policies' conditions themselves are replayed in tests/security/.
"""

from __future__ import annotations

import re

import boto3
import pytest
from typer.testing import CliRunner

from finetune.aws import infra
from finetune.aws.session import connect
from finetune.backends.ec2.request import RUN_TAG
from finetune.cli import app

from .conftest import REGION
from .control import instances_of

LIVE = ["pending", "running", "stopping", "stopped"]
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse")  # moto: no BucketPolicy


def _launch(dataset, *extra):
    args = ["launch", "smoke-resnet18", "--dataset", str(dataset), "--backend", "ec2"]
    return CliRunner().invoke(app, [*args, "--detach", *extra])


def _run_id(output: str) -> str:
    return re.search(r"Run (ft-[\w-]+) started", output)[1]


def _stack(vpc: str | None = None, **params) -> None:
    aws = connect(REGION)  # the fixture made the "finetune" repository already
    infra.deploy(aws, "finetune", "finetune-stack", poll_seconds=0, vpc=vpc, parameters=params)


def _other_vpc_subnet(ec2) -> tuple[str, str]:
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24", AvailabilityZone="us-east-1a")
    return vpc, subnet["Subnet"]["SubnetId"]


def test_what_the_stack_denies_is_refused_first_naming_the_parameter(ec2_aws, tiny_dataset):
    _stack(Ec2InstanceTypes="g6.*,g6e.*", MaxInstances="2", MaxRuntimeSeconds="14400")
    ec2 = boto3.client("ec2", region_name=REGION)
    _, elsewhere = _other_vpc_subnet(ec2)
    cases = [
        (("--instance", "g5.xlarge"), "Ec2InstanceTypes"),
        (("--instance", "g6.xlarge", "--fallback-instance", "p5.48xlarge"), "Ec2InstanceTypes"),
        (("--instance", "g6.xlarge", "--count", "3"), "MaxInstances"),
        (("--instance", "g6.xlarge", "--max-runtime", "5h"), "MaxRuntimeSeconds"),
        (("--instance", "g6.xlarge", "--subnet", elsewhere), "VpcId"),
    ]
    for args, parameter in cases:
        runtime = () if "--max-runtime" in args else ("--max-runtime", "4h")
        res = _launch(tiny_dataset, *args, *runtime)
        assert res.exit_code == 2, (args, res.output)
        assert parameter in res.output and "To fix:" in res.output, res.output
    assert ec2_aws.sent("RunInstances") == [] and ec2_aws.sent("CreateRole") == []
    res = _launch(tiny_dataset, "--instance", "g6.xlarge", "--max-runtime", "4h")
    assert res.exit_code == 0, res.output
    assert CliRunner().invoke(app, ["runs", "stop", _run_id(res.output)]).exit_code == 0


def test_without_a_subnet_a_run_lands_in_the_stacks_vpc(ec2_aws, tiny_dataset):
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc, subnet = _other_vpc_subnet(ec2)  # not the default VPC
    _stack(vpc=vpc)
    res = _launch(tiny_dataset, "--instance", "g5.xlarge")
    assert res.exit_code == 0, res.output
    (sent,) = ec2_aws.sent("RunInstances")
    assert sent["SubnetId"] == subnet
    (group,) = ec2.describe_security_groups(GroupIds=[sent["SecurityGroupId.1"]])["SecurityGroups"]
    assert group["VpcId"] == vpc
    assert CliRunner().invoke(app, ["runs", "stop", _run_id(res.output)]).exit_code == 0


def _group_of(ec2, run_id: str) -> dict:
    (inst, *_) = instances_of(run_id, LIVE)
    (gid,) = [g["GroupId"] for g in inst["SecurityGroups"]]
    (group,) = ec2.describe_security_groups(GroupIds=[gid])["SecurityGroups"]
    return group


def test_each_multi_host_run_has_its_own_sealed_group_gone_with_it(ec2_aws, tiny_dataset):
    ec2 = boto3.client("ec2", region_name=REGION)
    runs = []
    for _ in range(2):
        res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--count", "2")
        assert res.exit_code == 0, res.output
        runs.append(_run_id(res.output))
    first, second = (_group_of(ec2, r) for r in runs)
    assert first["GroupId"] != second["GroupId"]  # no host of one run is in the other's group
    for run_id, group in zip(runs, (first, second), strict=True):
        tags = {t["Key"]: t["Value"] for t in group["Tags"]}
        assert tags[RUN_TAG] == run_id and "finetune:rules" not in tags  # sealed
        me = boto3.client("sts", region_name=REGION).get_caller_identity()["UserId"]
        assert tags["finetune:owner-id"] == me  # what the policy compares with aws:userid
        (rule,) = group["IpPermissions"]
        assert [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [group["GroupId"]]
        assert not rule["IpRanges"] and not rule["Ipv6Ranges"]
    # born open, given its rule, sealed -- all before the instances were asked for
    order = [r.get("Action") for r in ec2_aws.requests]
    create = next(r for r in ec2_aws.requests if r.get("Action") == "CreateSecurityGroup")
    assert any(v == "finetune:rules" for k, v in create.items() if k.endswith(".Key"))
    first_launch = order.index("RunInstances")
    assert order.index("AuthorizeSecurityGroupIngress") < order.index("DeleteTags") < first_launch
    assert CliRunner().invoke(app, ["runs", "stop", runs[0]]).exit_code == 0
    CliRunner().invoke(app, ["runs", "show", runs[0]])  # the run is over: its group goes
    CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes"])  # or here, if held
    left = {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]}
    assert first["GroupId"] not in left and second["GroupId"] in left
    assert CliRunner().invoke(app, ["runs", "stop", runs[1]]).exit_code == 0


def test_a_relaunch_from_another_session_gets_a_group_of_its_own(ec2_aws):
    """Issue 34, N7: the caller policy launches into a run group only its maker (aws:userid):
    a later attempt made by another identity (a new role session) makes its own sealed group
    instead of being refused on the first one; the first maker gets its own group back."""
    from finetune.backends.ec2.instances.hosts import cluster_group

    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    first = cluster_group(ec2, vpc, "ft-20261127-000000-aaaa", "AROAEXAMPLE:session-1")
    second = cluster_group(ec2, vpc, "ft-20261127-000000-aaaa", "AROAEXAMPLE:session-2")
    assert second != first
    assert cluster_group(ec2, vpc, "ft-20261127-000000-aaaa", "AROAEXAMPLE:session-1") == first
    (group,) = ec2.describe_security_groups(GroupIds=[second])["SecurityGroups"]
    tags = {t["Key"]: t["Value"] for t in group["Tags"]}
    assert tags["finetune:owner-id"] == "AROAEXAMPLE:session-2" and "finetune:rules" not in tags
    (rule,) = group["IpPermissions"]
    assert [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [second]
