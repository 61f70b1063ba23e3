"""Issue 23, findings 3, 8 and 12, replayed through the shipped caller policies.

3/8. EC2 launches only into the stack's VpcId (subnets, new or existing network interfaces,
     security groups), and no rule can be added to a finetune group once it is sealed: a
     run's cluster group is born tagged finetune:rules=open, gets its one self-referencing
     rule, loses the tag (which nothing can put back), and only then may instances use it.
     IAM has no condition key on a rule's CIDR: while a caller's own new group is open it
     could add any rule; it cannot launch with it until sealed, and cannot touch other runs'.
12.  Instance types (ec2:InstanceType, sagemaker:InstanceTypes) and a SageMaker job's runtime
     (sagemaker:MaxRuntimeInSeconds) are held to the stack's parameters.
"""

from __future__ import annotations

import pytest

from finetune.aws import infra

from .iam_eval import Request, allowed

ACCOUNT, REGION, BUCKET = "123456789012", "eu-west-1", "finetune-test-bucket"
VPC_ID = "vpc-0a1b2c3d"
EC2 = f"arn:aws:ec2:{REGION}:{ACCOUNT}"
STACK_VPC, OTHER_VPC = f"{EC2}:vpc/{VPC_ID}", f"{EC2}:vpc/vpc-0badbad0"
PROFILE = f"arn:aws:iam::{ACCOUNT}:instance-profile/finetune-bounded/ec2/finetune-run-ft-1"
OPEN = {"aws:ResourceTag/project": "finetune", "aws:ResourceTag/finetune:rules": "open"}
ME, OTHER_USER = "AROAEXAMPLEMINE:alice", "AROAEXAMPLEOTHER:bob"
SEALED = {
    "aws:ResourceTag/project": "finetune",
    "aws:ResourceTag/finetune:run-id": "ft-1",
    "aws:ResourceTag/finetune:owner-id": ME,
    "aws:userid": ME,
}
SHARED = {"aws:ResourceTag/project": "finetune"}  # the no-ingress group of single-host runs
LAUNCHED_BY_ME = {"aws:RequestTag/finetune:owner-id": ME, "aws:userid": ME}  # what a launch tags


def _policy(kind: str, **params) -> dict:
    names = infra.Names(ACCOUNT, REGION, BUCKET, extra={"VpcId": VPC_ID, **params})
    return infra.render(infra.policy_document(kind), names)


@pytest.fixture(scope="module")
def ec2() -> dict:
    return _policy("ec2-caller")


def _run(policy, resource: str, ctx: dict) -> bool:
    return allowed(policy, Request("ec2:RunInstances", f"{EC2}:{resource}", ctx))


def test_launches_stay_in_the_stacks_vpc(ec2):
    for resource in ("subnet/subnet-1", "network-interface/*", "network-interface/eni-0old"):
        assert _run(ec2, resource, {"ec2:Vpc": STACK_VPC}), resource
        assert not _run(ec2, resource, {"ec2:Vpc": OTHER_VPC}), resource
        assert not _run(ec2, resource, {}), resource
    assert _run(ec2, "security-group/sg-1", {**SEALED, "ec2:Vpc": STACK_VPC})
    assert not _run(ec2, "security-group/sg-1", {**SEALED, "ec2:Vpc": OTHER_VPC})
    create = Request("ec2:CreateSecurityGroup", STACK_VPC)
    assert allowed(ec2, create)
    assert not allowed(ec2, Request("ec2:CreateSecurityGroup", OTHER_VPC))


def test_rules_go_only_on_a_group_being_made_and_launches_need_it_sealed(ec2):
    group = f"{EC2}:security-group/sg-1"
    authorize = "ec2:AuthorizeSecurityGroupIngress"
    assert allowed(ec2, Request(authorize, group, OPEN))
    assert not allowed(ec2, Request(authorize, group, SEALED))  # another run's live group
    assert not allowed(ec2, Request(authorize, group, {"aws:ResourceTag/project": "finetune"}))
    assert not _run(ec2, "security-group/sg-1", {**OPEN, "ec2:Vpc": STACK_VPC})
    # sealing removes that one tag; the tag cannot come back, nor other tags go
    seal = {"aws:ResourceTag/project": "finetune", "aws:TagKeys": ["finetune:rules"]}
    assert allowed(ec2, Request("ec2:DeleteTags", group, seal))
    for keys in (["project"], ["finetune:rules", "project"]):
        strip = {**seal, "aws:TagKeys": keys}
        assert not allowed(ec2, Request("ec2:DeleteTags", group, strip)), keys
    everything = {"aws:ResourceTag/project": "finetune"}  # DeleteTags without Tags: all
    assert not allowed(ec2, Request("ec2:DeleteTags", group, everything))
    reopen = {**SEALED, "aws:RequestTag/finetune:rules": "open", "aws:TagKeys": ["finetune:rules"]}
    assert not allowed(ec2, Request("ec2:CreateTags", group, reopen))


def test_only_run_groups_are_deleted(ec2):
    group = f"{EC2}:security-group/sg-1"
    assert allowed(ec2, Request("ec2:DeleteSecurityGroup", group, SEALED))
    shared = {"aws:ResourceTag/project": "finetune"}  # the no-ingress group of every run
    assert not allowed(ec2, Request("ec2:DeleteSecurityGroup", group, shared))
    assert not allowed(ec2, Request("ec2:DeleteSecurityGroup", group))


def test_ec2_instance_types_are_the_stacks(ec2):
    profile = {"ec2:InstanceProfile": PROFILE, "ec2:MetadataHttpTokens": "required"}
    base = {"aws:RequestTag/project": "finetune", **LAUNCHED_BY_ME, **profile}
    assert _run(ec2, "instance/*", {**base, "ec2:InstanceType": "g5.xlarge"})
    assert _run(ec2, "instance/*", {**base, "ec2:InstanceType": "p5.48xlarge"})
    assert not _run(ec2, "instance/*", {**base, "ec2:InstanceType": "x2iedn.32xlarge"})
    narrow = _policy("ec2-caller", Ec2InstanceTypes=["g6.xlarge"])
    assert not _run(narrow, "instance/*", {**base, "ec2:InstanceType": "g5.xlarge"})
    assert _run(narrow, "instance/*", {**base, "ec2:InstanceType": "g6.xlarge"})


def _job(types, runtime) -> Request:
    ctx = {"sagemaker:InstanceTypes": types}
    if runtime is not None:
        ctx["sagemaker:MaxRuntimeInSeconds"] = str(runtime)
    job = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/finetune-ft-1"
    return Request("sagemaker:CreateTrainingJob", job, ctx)


def test_sagemaker_jobs_of_the_stacks_types_and_runtime_only():
    sm = _policy("caller")
    assert allowed(sm, _job(["ml.g5.xlarge"], 3600))
    assert allowed(sm, _job(["ml.p4d.24xlarge"], 86400))
    assert not allowed(sm, _job(["ml.g5.xlarge"], 86401))
    assert not allowed(sm, _job(["ml.g5.xlarge"], None))
    assert not allowed(sm, _job(["ml.m5.24xlarge"], 3600))
    assert not allowed(sm, _job(["ml.g5.xlarge", "ml.x2iedn.32xlarge"], 3600))  # heterogeneous
    assert not allowed(sm, Request("sagemaker:CreateTrainingJob", _job([], 1).resource))
    short = _policy("caller", MaxRuntimeSeconds="7200")
    assert not allowed(short, _job(["ml.g5.xlarge"], 7201))
    assert allowed(short, _job(["ml.g5.xlarge"], 7200))


def test_a_run_group_takes_only_its_makers_instances(ec2):
    """Issue 34, N7: no EC2 caller places an instance inside another user's live run."""
    here = {"ec2:Vpc": STACK_VPC}
    assert _run(ec2, "security-group/sg-1", {**SEALED, **here})
    assert not _run(ec2, "security-group/sg-1", {**SEALED, **here, "aws:userid": OTHER_USER})
    untagged = {k: v for k, v in SEALED.items() if k != "aws:ResourceTag/finetune:owner-id"}
    assert not _run(ec2, "security-group/sg-1", {**untagged, **here})  # an older run's group
    assert _run(ec2, "security-group/sg-0", {**SHARED, **here, "aws:userid": OTHER_USER})


def test_a_run_group_is_born_with_its_makers_id(ec2):
    group = f"{EC2}:security-group/*"
    tags = {"aws:RequestTag/project": "finetune", "aws:RequestTag/finetune:run-id": "ft-1"}
    mine = {**tags, "aws:RequestTag/finetune:owner-id": ME, "aws:userid": ME}
    assert allowed(ec2, Request("ec2:CreateSecurityGroup", group, mine))
    create = {**mine, "ec2:CreateAction": "CreateSecurityGroup"}
    assert allowed(ec2, Request("ec2:CreateTags", group, create))
    for forged in ({**mine, "aws:userid": OTHER_USER}, {**tags, "aws:userid": ME}):
        assert not allowed(ec2, Request("ec2:CreateSecurityGroup", group, forged))
        forged = {**forged, "ec2:CreateAction": "CreateSecurityGroup"}
        assert not allowed(ec2, Request("ec2:CreateTags", group, forged))
    shared = {"aws:RequestTag/project": "finetune", "aws:userid": ME}  # no run: no owner
    assert allowed(ec2, Request("ec2:CreateSecurityGroup", group, shared))


def test_volumes_are_encrypted_by_the_policy(ec2):
    """Issue 34, N10: an unencrypted volume is denied whoever builds the request."""
    tagged = {"aws:RequestTag/project": "finetune", **LAUNCHED_BY_ME}
    assert _run(ec2, "volume/*", {**tagged, "ec2:Encrypted": "true"})
    assert not _run(ec2, "volume/*", {**tagged, "ec2:Encrypted": "false"})
    assert not _run(ec2, "volume/*", tagged)
    assert _run(ec2, "spot-instances-request/*", tagged)
