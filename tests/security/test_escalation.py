"""The shipped caller policies and run boundary, evaluated against the escalation paths of
issue 16 (tests/security/iam_eval.py implements IAM's evaluation logic for them): each path
is denied, and the calls a launch really makes are allowed."""

from __future__ import annotations

import pytest

from finetune.aws import infra

from .iam_eval import Request, allowed

ACCOUNT, REGION, BUCKET = "123456789012", "us-east-1", "finetune-test-bucket"
VPC_ID = "vpc-0a1b2c3d"
NAMES = infra.Names(account=ACCOUNT, region=REGION, bucket=BUCKET, extra={"VpcId": VPC_ID})
BOUNDARY = infra.boundary_arn(ACCOUNT, REGION, "ec2")
ROLE = f"arn:aws:iam::{ACCOUNT}:role/finetune-bounded/ec2/finetune-run-ft-1"
PROFILE = f"arn:aws:iam::{ACCOUNT}:instance-profile/finetune-bounded/ec2/finetune-run-ft-1"
SM_ROLE = f"arn:aws:iam::{ACCOUNT}:role/finetune-bounded/sagemaker/finetune-run-ft-1"
EC2 = f"arn:aws:ec2:{REGION}:{ACCOUNT}"
VPC = f"{EC2}:vpc/{VPC_ID}"
ON_AN_INSTANCE = {  # EC2 instance-profile credentials carry both
    "aws:EC2InstanceSourceVPC": VPC_ID,
    "ec2:SourceInstanceARN": "arn:aws:ec2:eu-west-1:123456789012:instance/i-0abc",
}
ADMIN = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}


@pytest.fixture(scope="module")
def caller() -> dict:
    return infra.render(infra.policy_document("ec2-caller"), NAMES)


@pytest.fixture(scope="module")
def boundary() -> dict:
    return infra.render(infra.policy_document("ec2-boundary"), NAMES)


def test_the_boundary_arn_the_code_passes_is_the_one_the_policy_names(caller):
    assert f"arn:aws:iam::{ACCOUNT}:policy/finetune/finetune-ec2-run-boundary-{REGION}" == BOUNDARY
    assert NAMES.values()["Ec2RunBoundary"] == BOUNDARY
    assert BOUNDARY in str(caller)


@pytest.mark.parametrize(
    "bound",
    [None, f"arn:aws:iam::{ACCOUNT}:policy/mine", "arn:aws:iam::aws:policy/AdministratorAccess"],
)
def test_run_roles_cannot_be_created_or_widened_without_the_boundary(caller, bound):
    ctx = {"iam:PermissionsBoundary": bound} if bound else {}
    for action in ("iam:CreateRole", "iam:PutRolePolicy", "iam:AttachRolePolicy"):
        assert not allowed(caller, Request(action, ROLE, ctx)), action
    good = {"iam:PermissionsBoundary": BOUNDARY}
    assert allowed(caller, Request("iam:CreateRole", ROLE, good))
    assert allowed(caller, Request("iam:PutRolePolicy", ROLE, good))


def test_only_session_managers_policy_can_be_attached(caller):
    ssm = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
    ctx = {"iam:PermissionsBoundary": BOUNDARY}
    assert allowed(caller, Request("iam:AttachRolePolicy", ROLE, {**ctx, "iam:PolicyARN": ssm}))
    admin = {**ctx, "iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}
    assert not allowed(caller, Request("iam:AttachRolePolicy", ROLE, admin))


def test_a_star_inline_policy_on_a_bounded_role_stays_inside_the_boundary(boundary):
    """The escalation of the issue, after the fix: even `*:*` on a run role grants no IAM,
    no other bucket and nothing outside finetune/ of ours."""

    def can(action, resource, **ctx):
        return allowed(ADMIN, Request(action, resource, {**ON_AN_INSTANCE, **ctx}), boundary)

    for action in ("iam:CreateUser", "iam:AttachUserPolicy", "iam:PassRole", "sts:AssumeRole"):
        assert not can(action, "*"), action
    assert not can("ec2:RunInstances", f"{EC2}:instance/*")
    assert not can("s3:GetObject", "arn:aws:s3:::another-bucket/secret")
    assert not can("s3:GetObject", f"arn:aws:s3:::{BUCKET}/private/x")
    assert not can("s3:ListBucket", f"arn:aws:s3:::{BUCKET}", **{"s3:prefix": ""})
    assert can("s3:GetObject", f"arn:aws:s3:::{BUCKET}/finetune/runs/ft-1/plan.json")


def test_the_boundary_itself_cannot_be_changed_or_removed(caller):
    for action in ("iam:CreatePolicyVersion", "iam:DeletePolicy", "iam:SetDefaultPolicyVersion"):
        assert not allowed([caller, ADMIN], Request(action, BOUNDARY))
    for action in ("iam:DeleteRolePermissionsBoundary", "iam:PutRolePermissionsBoundary"):
        assert not allowed([caller, ADMIN], Request(action, ROLE))


@pytest.mark.parametrize(
    ("service", "ok"), [("ec2.amazonaws.com", True), ("lambda.amazonaws.com", False)]
)
def test_run_roles_are_passed_to_ec2_only(caller, service, ok):
    assert allowed(caller, Request("iam:PassRole", ROLE, {"iam:PassedToService": service})) is ok
    assert not allowed(caller, Request("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/admin"))


def _run_instances(
    caller,
    *,
    owner="amazon",
    profile=PROFILE,
    tokens="required",
    group_tag=True,
    vpc=VPC,
    instance_type="g5.xlarge",
    group_tags=(),
):
    """RunInstances is allowed only if every resource it touches is."""
    tags = {"aws:RequestTag/project": "finetune", "aws:TagKeys": ["project"]}
    tags |= {"aws:RequestTag/finetune:owner-id": "AIDAEXAMPLEUSER", "aws:userid": "AIDAEXAMPLEUSER"}
    group = {"aws:ResourceTag/project": "finetune"} if group_tag else {}
    group.update({f"aws:ResourceTag/{k}": v for k, v in group_tags})
    instance = {"ec2:MetadataHttpTokens": tokens, "ec2:InstanceProfile": profile}
    asks = [
        (f"{EC2}:instance/*", {**tags, **instance, "ec2:InstanceType": instance_type}),
        (f"{EC2}:volume/*", {**tags, "ec2:Encrypted": "true"}),
        (f"arn:aws:ec2:{REGION}::image/ami-1", {"ec2:Owner": owner}),
        (f"{EC2}:subnet/subnet-1", {"ec2:Vpc": vpc}),
        (f"{EC2}:network-interface/*", {"ec2:Vpc": vpc}),
        (f"{EC2}:security-group/sg-1", {**group, "ec2:Vpc": vpc}),
    ]
    return all(allowed(caller, Request("ec2:RunInstances", r, c)) for r, c in asks)


def test_launches_need_amazon_amis_run_profiles_imdsv2_and_finetune_groups(caller):
    assert _run_instances(caller)
    assert not _run_instances(caller, owner="210987654321")  # any community AMI
    admin_profile = f"arn:aws:iam::{ACCOUNT}:instance-profile/admin"
    assert not _run_instances(caller, profile=admin_profile)
    assert not _run_instances(caller, tokens="optional")
    assert not _run_instances(caller, group_tag=False)


def test_foreign_instances_can_be_neither_tagged_nor_terminated(caller):
    foreign = f"{EC2}:instance/i-foreign"
    tag = {"aws:RequestTag/project": "finetune", "aws:TagKeys": ["project"]}
    assert not allowed(caller, Request("ec2:CreateTags", foreign, tag))  # the old bypass
    assert not allowed(caller, Request("ec2:TerminateInstances", foreign))
    for kind in ("security-group/sg-1", "vpc/vpc-1"):
        assert not allowed(caller, Request("ec2:CreateTags", f"{EC2}:{kind}", tag)), kind
    assert not allowed(
        caller, Request("ec2:AuthorizeSecurityGroupIngress", f"{EC2}:security-group/sg-1")
    )
    sealed = {"aws:ResourceTag/project": "finetune", "aws:ResourceTag/finetune:run-id": "ft-2"}
    assert not allowed(  # another run's live (sealed) cluster group: no rule can be added
        caller, Request("ec2:AuthorizeSecurityGroupIngress", f"{EC2}:security-group/sg-2", sealed)
    )


def test_own_instances_tagged_at_launch_and_named_after(caller):
    mine = f"{EC2}:instance/i-mine"
    at_launch = {
        "ec2:CreateAction": "RunInstances",
        "aws:RequestTag/project": "finetune",
        "aws:TagKeys": ["project", "finetune:run-id"],
    }
    assert allowed(caller, Request("ec2:CreateTags", mine, at_launch))
    owned = {"aws:ResourceTag/project": "finetune"}
    host = {"aws:RequestTag/project": "finetune", "aws:TagKeys": ["project", "finetune:host"]}
    assert allowed(caller, Request("ec2:CreateTags", mine, {**owned, **host}))
    assert allowed(caller, Request("ec2:TerminateInstances", mine, owned))
    without_project = {**owned, "aws:TagKeys": ["finetune:host"]}  # what hosts.py used to send
    assert not allowed(caller, Request("ec2:CreateTags", mine, without_project))
    relabel = {**owned, "aws:RequestTag/project": "other", "aws:TagKeys": ["project"]}
    assert not allowed(caller, Request("ec2:CreateTags", mine, relabel))
    group = {"ec2:CreateAction": "CreateSecurityGroup", "aws:RequestTag/project": "finetune"}
    assert allowed(caller, Request("ec2:CreateTags", f"{EC2}:security-group/sg-1", group))


def test_caller_s3_is_datasets_and_run_prefixes_only(caller):
    obj = f"arn:aws:s3:::{BUCKET}/finetune"
    assert allowed(caller, Request("s3:PutObject", f"{obj}/datasets/d-1/train/x.rec"))
    assert allowed(caller, Request("s3:PutObject", f"{obj}/runs/ft-1/plan.json"))
    assert not allowed(caller, Request("s3:DeleteObject", f"{obj}/runs/ft-1/plan.json"))
    assert not allowed(caller, Request("s3:PutObject", f"arn:aws:s3:::{BUCKET}/elsewhere"))


def test_the_sagemaker_caller_policy_holds_the_same_line():
    """The SageMaker caller creates per-run execution roles: the same boundary rule, and
    those roles go to SageMaker only."""
    caller = infra.render(infra.policy_document("caller"), NAMES)
    assert not allowed(caller, Request("iam:CreateRole", SM_ROLE))
    assert not allowed(caller, Request("iam:PutRolePolicy", SM_ROLE))
    good = {"iam:PermissionsBoundary": infra.boundary_arn(ACCOUNT, REGION, "sagemaker")}
    assert allowed(caller, Request("iam:CreateRole", SM_ROLE, good))
    assert not allowed(caller, Request("iam:AttachRolePolicy", SM_ROLE, good))
    to = {"iam:PassedToService": "sagemaker.amazonaws.com"}
    assert allowed(caller, Request("iam:PassRole", SM_ROLE, to))
    assert not allowed(
        caller, Request("iam:PassRole", SM_ROLE, {"iam:PassedToService": "ec2.amazonaws.com"})
    )
    assert not allowed([caller, ADMIN], Request("iam:DeleteRolePermissionsBoundary", SM_ROLE))
    assert not allowed([caller, ADMIN], Request("iam:CreatePolicyVersion", BOUNDARY))
