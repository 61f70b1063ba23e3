"""Issue 49, S5-1 and S5-2, replayed through the shipped EC2 caller policy: EC2 resources are
bound to their maker's aws:userid (finetune:owner-id), enforced when they are created.

- S5-1: Bob plants a group named for Alice's run, tagged with Alice's owner id and no run id.
  Creating it is now denied, and a group planted before the policy changed takes no launch
  of Bob's (only its owner's); the shared no-ingress group still takes anyone's.
- S5-2: Bob launches an instance tagged with Alice's run, attempt and owner id: denied; an
  instance must carry its own launcher's id. (finetune itself adopts only its own instances:
  tests/backends/ec2/test_owner_adoption.py.)
"""

from __future__ import annotations

import pytest

from finetune.aws import infra

from .iam_eval import Request, allowed

ACCOUNT, REGION, BUCKET = "123456789012", "eu-west-1", "finetune-test-bucket"
VPC_ID = "vpc-0a1b2c3d"
EC2 = f"arn:aws:ec2:{REGION}:{ACCOUNT}"
ALICE, BOB = "AROAEXAMPLEALICE:alice", "AROAEXAMPLEBOB:bob"
RUN = "ft-20261128-101500-a3f9"
PROFILE = f"arn:aws:iam::{ACCOUNT}:instance-profile/finetune-bounded/ec2/finetune-run-{RUN}"
HERE = {"ec2:Vpc": f"{EC2}:vpc/{VPC_ID}"}


@pytest.fixture(scope="module")
def ec2() -> dict:
    names = infra.Names(ACCOUNT, REGION, BUCKET, extra={"VpcId": VPC_ID})
    return infra.render(infra.policy_document("ec2-caller"), names)


def _key(name: str) -> str:
    """finetune_owner_id -> finetune:owner-id"""
    return name.replace("_", ":", 1).replace("_", "-")


def _tags(**tags: str) -> dict:
    ctx = {f"aws:RequestTag/{_key(k)}": v for k, v in tags.items()}
    return {**ctx, "aws:TagKeys": [_key(k) for k in tags]}


def _create_group(ec2, who: str, **tags: str) -> bool:
    """CreateSecurityGroup with tags, and the CreateTags it implies (at creation)."""
    ctx = {**_tags(project="finetune", **tags), "aws:userid": who}
    group = f"{EC2}:security-group/*"
    create = allowed(ec2, Request("ec2:CreateSecurityGroup", group, ctx))
    tag = Request("ec2:CreateTags", group, {**ctx, "ec2:CreateAction": "CreateSecurityGroup"})
    return create and allowed(ec2, tag)


def test_s5_1_no_one_plants_a_group_in_anothers_name(ec2):
    assert not _create_group(ec2, BOB, finetune_owner_id=ALICE, finetune_rules="open")
    assert not _create_group(ec2, BOB, finetune_owner_id=ALICE, finetune_run_id=RUN)
    assert _create_group(ec2, ALICE, finetune_owner_id=ALICE, finetune_run_id=RUN,
                         finetune_rules="open")  # fmt: skip
    assert _create_group(ec2, BOB)  # the shared no-ingress group: no run, no owner


def test_s5_1_a_group_planted_earlier_takes_no_launch_of_the_planter(ec2):
    """Planted before the policy changed: Alice's owner id, no run id, sealed by Alice's
    launch (older code adopted it by name): Bob cannot launch into it, Alice still can."""
    planted = {"aws:ResourceTag/project": "finetune", "aws:ResourceTag/finetune:owner-id": ALICE}
    group = f"{EC2}:security-group/sg-0planted"
    for who, ok in ((BOB, False), (ALICE, True)):
        req = Request("ec2:RunInstances", group, {**planted, **HERE, "aws:userid": who})
        assert allowed(ec2, req) is ok, who
    shared = {"aws:ResourceTag/project": "finetune", **HERE, "aws:userid": BOB}
    assert allowed(ec2, Request("ec2:RunInstances", f"{EC2}:security-group/sg-0shared", shared))


def _launch(ec2, who: str, **tags: str) -> bool:
    """Every resource RunInstances creates (instance, volume, spot request) and its tags."""
    ctx = {**_tags(project="finetune", **tags), "aws:userid": who}
    instance = {"ec2:MetadataHttpTokens": "required", "ec2:InstanceProfile": PROFILE,
                "ec2:InstanceType": "g5.xlarge"}  # fmt: skip
    asks = [
        ("instance/*", {**ctx, **instance}),
        ("volume/*", {**ctx, "ec2:Encrypted": "true"}),
        ("spot-instances-request/*", ctx),
    ]
    run = all(allowed(ec2, Request("ec2:RunInstances", f"{EC2}:{r}", c)) for r, c in asks)
    tag = {**ctx, "ec2:CreateAction": "RunInstances"}
    return run and allowed(ec2, Request("ec2:CreateTags", f"{EC2}:instance/*", tag))


def test_s5_2_no_one_launches_in_anothers_name(ec2):
    theirs = {"finetune_run_id": RUN, "finetune_attempt": "2"}
    assert not _launch(ec2, BOB, finetune_owner_id=ALICE, **theirs)
    assert not _launch(ec2, BOB, **theirs)  # no owner id at all
    assert _launch(ec2, BOB, finetune_owner_id=BOB, **theirs)  # his own: tags prove nothing
    assert _launch(ec2, ALICE, finetune_owner_id=ALICE, **theirs)  # what finetune sends


def test_s5_2_the_owner_id_cannot_be_added_later(ec2):
    inst = f"{EC2}:instance/i-0bob"
    owned = {"aws:ResourceTag/project": "finetune", "aws:userid": BOB}
    relabel = {**owned, **_tags(project="finetune", finetune_owner_id=ALICE)}
    assert not allowed(ec2, Request("ec2:CreateTags", inst, relabel))
    host = {**owned, **_tags(project="finetune", finetune_host="algo-1")}
    assert allowed(ec2, Request("ec2:CreateTags", inst, host))  # naming hosts still works
