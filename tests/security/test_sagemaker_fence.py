"""Issue 34, items 2 and 3: the SageMaker side fenced like the EC2 side, replayed through the
shipped policies (rendered as `finetune infra print` does) with the project's evaluator.

- CreateTrainingJob: a job in a VPC only in the stack's SageMakerSubnets and
  SageMakerSecurityGroups (default "none": no job in a VPC); a job without a VPC as before.
- The SageMaker run boundary: network interfaces only in the stack's VpcId; no other VPC's
  interface shared or deleted.
- A role minted under the boundary with any trust: its credentials are refused unless the
  session is named SageMaker (the assumer's choice: test_run_role_session_name.py) and came
  through no web-identity provider; the perimeter (an RCP) denies every
  STS action that hands out a run role's credentials to anyone but an AWS service.
"""

from __future__ import annotations

import pytest

from finetune.aws import infra

from .iam_eval import AS_SAGEMAKER, DENY, Request, allowed, decide

ACCOUNT, REGION, BUCKET = "123456789012", "eu-west-1", "finetune-test-bucket"
VPC_ID, SUBNET, GROUP = "vpc-0a1b2c3d", "subnet-0a1b2c3d", "sg-0f1e2d3c"
EC2 = f"arn:aws:ec2:{REGION}:{ACCOUNT}"
OURS = {"ec2:Vpc": f"{EC2}:vpc/{VPC_ID}", "ec2:Subnet": f"{EC2}:subnet/{SUBNET}"}
FOREIGN = {"ec2:Vpc": f"{EC2}:vpc/vpc-0badbad0"}
JOB = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/finetune-ft-1"
SM_ROLE = f"arn:aws:iam::{ACCOUNT}:role/finetune-bounded/sagemaker/finetune-run-ft-1"
EVERYTHING = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}
GITHUB = "token.actions.githubusercontent.com"
CHECKPOINT = f"arn:aws:s3:::{BUCKET}/finetune/checkpoints/ft-other/epoch-1/params"


def _policy(kind: str, **params) -> dict:
    names = infra.Names(ACCOUNT, REGION, BUCKET, extra={"VpcId": VPC_ID, **params})
    return infra.render(infra.policy_document(kind), names)


def _job(subnets=None, groups=None) -> Request:
    ctx = {"sagemaker:InstanceTypes": ["ml.g5.xlarge"], "sagemaker:MaxRuntimeInSeconds": "3600"}
    if subnets is not None:
        ctx["sagemaker:VpcSubnets"] = subnets
    if groups is not None:
        ctx["sagemaker:VpcSecurityGroupIds"] = groups
    return Request("sagemaker:CreateTrainingJob", JOB, ctx)


def test_a_job_goes_only_into_the_stacks_subnets_and_groups():
    fenced = _policy("caller", SageMakerSubnets=[SUBNET], SageMakerSecurityGroups=[GROUP])
    assert allowed(fenced, _job())  # the normal job: no VPC
    assert allowed(fenced, _job([SUBNET], [GROUP]))
    assert not allowed(fenced, _job(["subnet-0f0re1gn"], [GROUP]))  # a foreign subnet
    assert not allowed(fenced, _job([SUBNET], ["sg-0db0trusted"]))  # a group a database trusts
    assert not allowed(fenced, _job([SUBNET, "subnet-0f0re1gn"], [GROUP]))


def test_by_default_no_job_runs_in_a_vpc():
    default = _policy("caller")
    assert allowed(default, _job())
    assert not allowed(default, _job([SUBNET], [GROUP]))


@pytest.fixture(scope="module")
def boundary() -> dict:
    """The boundary of a stack fenced to one subnet and group (what a job in a VPC needs)."""
    return _policy("sagemaker-boundary", SageMakerSubnets=[SUBNET], SageMakerSecurityGroups=[GROUP])


def _minted(boundary, action: str, resource: str, **ctx) -> bool:
    """A `*:*` role a caller minted under the SageMaker boundary, used by SageMaker's job."""
    return allowed(EVERYTHING, Request(action, resource, {**AS_SAGEMAKER, **ctx}), boundary)


def test_interfaces_only_in_the_stacks_vpc(boundary):
    create = "ec2:CreateNetworkInterface"
    for target in (f"subnet/{SUBNET}", f"security-group/{GROUP}", "network-interface/*"):
        assert _minted(boundary, create, f"{EC2}:{target}", **OURS), target
        assert not _minted(boundary, create, f"{EC2}:{target}", **FOREIGN), target
        assert not _minted(boundary, create, f"{EC2}:{target}"), target  # no key: denied


def test_no_interface_outside_the_stacks_vpc_is_deleted_or_shared(boundary):
    eni = f"{EC2}:network-interface/eni-0prod"
    for action in ("ec2:DeleteNetworkInterface", "ec2:CreateNetworkInterfacePermission"):
        assert not _minted(boundary, action, eni, **FOREIGN), action
        assert not _minted(boundary, action, eni), action
        assert _minted(boundary, action, eni, **OURS), action


def test_s5_9_interfaces_only_with_the_stacks_subnets_and_groups(boundary):
    """Issue 49, S5-9: inside VpcId too, a minted role's interfaces go only into the stack's
    SageMakerSubnets with its SageMakerSecurityGroups, and only interfaces in those subnets
    are deleted or shared; unsharing is no longer region-wide."""
    create = "ec2:CreateNetworkInterface"
    assert not _minted(boundary, create, f"{EC2}:security-group/sg-0db0trusted", **OURS)
    assert not _minted(boundary, create, f"{EC2}:subnet/subnet-0ther", **OURS)
    theirs = {**OURS, "ec2:Subnet": f"{EC2}:subnet/subnet-0ther"}  # another workload's
    for action in (
        "ec2:DeleteNetworkInterface",
        "ec2:CreateNetworkInterfacePermission",
        "ec2:DeleteNetworkInterfacePermission",
    ):
        assert not _minted(boundary, action, f"{EC2}:network-interface/eni-0db", **theirs), action
        assert _minted(boundary, action, f"{EC2}:network-interface/eni-0job", **OURS), action
    region_wide = {"aws:RequestedRegion": REGION}
    assert not _minted(boundary, "ec2:DeleteNetworkInterfacePermission", "*", **region_wide)
    assert _minted(boundary, "ec2:DescribeSubnets", "*", **region_wide)


def test_s5_9_a_stack_without_sagemaker_subnets_allows_no_interface():
    default = _policy("sagemaker-boundary")  # SageMakerSubnets "none": jobs without a VPC
    for target in (f"subnet/{SUBNET}", f"security-group/{GROUP}"):
        assert not _minted(default, "ec2:CreateNetworkInterface", f"{EC2}:{target}", **OURS)
    eni = f"{EC2}:network-interface/eni-0job"
    assert not _minted(default, "ec2:DeleteNetworkInterface", eni, **OURS)


def test_a_minted_role_with_foreign_trust_can_do_nothing(boundary):
    """Its credentials come from AssumeRole by whoever it trusts (another account, the caller):
    the session is theirs, not SageMaker's; from AssumeRoleWithWebIdentity (an OIDC provider
    such as GitHub Actions): aws:FederatedProvider is set, whatever the session's name."""
    for ctx in (
        {"aws:userid": "AROAEXAMPLEROLEID:attacker"},
        {"aws:userid": "AROAEXAMPLEROLEID:botocore-session-1700000000"},
        {
            "aws:userid": "AROAEXAMPLEROLEID:SageMaker",
            "aws:FederatedProvider": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{GITHUB}",
        },
        {},
    ):
        for action, resource in (("s3:GetObject", CHECKPOINT), ("s3:PutObject", CHECKPOINT)):
            req = Request(action, resource, ctx)
            assert decide([boundary], req) == DENY, ctx
            assert not allowed(EVERYTHING, req, boundary)
    # the same role as SageMaker's session of a job: what the boundary allows a run
    assert _minted(boundary, "s3:GetObject", CHECKPOINT)


@pytest.mark.parametrize(
    "action",
    [
        "sts:AssumeRole",
        "sts:AssumeRoleWithSAML",
        "sts:AssumeRoleWithWebIdentity",
        "sts:TagSession",
        "sts:SetSourceIdentity",
        "sts:SetContext",
    ],
)
def test_the_perimeter_covers_every_way_to_a_run_roles_credentials(action):
    perimeter = _policy("perimeter")
    for ctx in ({}, {"aws:PrincipalIsAWSService": "false"}):  # a user, an account, a provider
        assert decide([perimeter], Request(action, SM_ROLE, ctx)) == DENY
    service = Request(action, SM_ROLE, {"aws:PrincipalIsAWSService": "true"})
    assert decide([perimeter], service) != DENY
