"""Issue 23, findings 1 and 2, replayed through the shipped policies (tests/security/iam_eval.py).

1. Roles older finetune versions made at /finetune/ (some with no boundary and AWS's Session
   Manager policy) matched the PassRole, instance-profile and ec2:InstanceProfile statements
   by name. Run roles now live under /finetune-bounded/<backend>/, a path no older policy
   could create roles in: a legacy role can be neither passed nor launched, nor put into a
   run profile (AddRoleToInstanceProfile needs PassRole on the role -- a dependent action the
   evaluator does not chain, so the PassRole it needs is replayed instead).
2. One boundary per backend: a role a caller mints holds at most its backend's prefixes, and
   an EC2 role's credentials do nothing unless signed on an instance
   (aws:EC2InstanceSourceVPC present). The evaluator does not read trust policies; what it
   shows is that a role assumed any other way -- whatever its trust -- is denied everything.
"""

from __future__ import annotations

import pytest

from finetune.aws import infra

from .iam_eval import AS_SAGEMAKER, Request, allowed

ACCOUNT, REGION, BUCKET = "123456789012", "eu-west-1", "finetune-test-bucket"
NAMES = infra.Names(ACCOUNT, REGION, BUCKET, extra={"VpcId": "vpc-0a1b2c3d"})
IAM = f"arn:aws:iam::{ACCOUNT}"
LEGACY_ROLE = f"{IAM}:role/finetune/finetune-run-ft-20261101-000000-dead"
LEGACY_PROFILE = f"{IAM}:instance-profile/finetune/finetune-run-ft-20261101-000000-dead"
EC2_ROLE = f"{IAM}:role/finetune-bounded/ec2/finetune-run-ft-1"
EC2_PROFILE = f"{IAM}:instance-profile/finetune-bounded/ec2/finetune-run-ft-1"
SM_ROLE = f"{IAM}:role/finetune-bounded/sagemaker/finetune-run-ft-1"
OBJ = f"arn:aws:s3:::{BUCKET}"
EVERYTHING = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}
ON_AN_INSTANCE = {
    "aws:EC2InstanceSourceVPC": "vpc-0a1b2c3d",
    "ec2:SourceInstanceARN": "arn:aws:ec2:eu-west-1:123456789012:instance/i-0abc",
}


def _policy(kind: str) -> dict:
    return infra.render(infra.policy_document(kind), NAMES)


def _launch_asks(profile: str) -> Request:
    ctx = {
        "aws:RequestTag/project": "finetune",
        "aws:RequestTag/finetune:owner-id": "AIDAEXAMPLEUSER",  # the launcher, as it sends
        "aws:userid": "AIDAEXAMPLEUSER",
        "ec2:MetadataHttpTokens": "required",
        "ec2:InstanceProfile": profile,
        "ec2:InstanceType": "g5.xlarge",
    }
    return Request("ec2:RunInstances", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/*", ctx)


@pytest.mark.parametrize(("caller", "service"), [("ec2-caller", "ec2"), ("caller", "sagemaker")])
def test_a_legacy_run_role_can_be_neither_passed_nor_launched(caller, service):
    policy = _policy(caller)
    to = {"iam:PassedToService": f"{service}.amazonaws.com"}
    assert not allowed(policy, Request("iam:PassRole", LEGACY_ROLE, to))
    new = EC2_ROLE if service == "ec2" else SM_ROLE
    assert allowed(policy, Request("iam:PassRole", new, to))  # this version's roles still go
    # nor can it be widened, re-bounded or relabelled under its old name
    for action in ("iam:PutRolePolicy", "iam:AttachRolePolicy", "iam:CreateRole"):
        bound = {"iam:PermissionsBoundary": infra.boundary_arn(ACCOUNT, REGION, service)}
        assert not allowed(policy, Request(action, LEGACY_ROLE, bound)), action


def test_a_legacy_profile_cannot_launch_and_a_legacy_role_cannot_enter_a_run_profile():
    policy = _policy("ec2-caller")
    assert not allowed(policy, _launch_asks(LEGACY_PROFILE))
    assert allowed(policy, _launch_asks(EC2_PROFILE))
    for action in ("iam:AddRoleToInstanceProfile", "iam:GetInstanceProfile"):
        assert not allowed(policy, Request(action, LEGACY_PROFILE)), action
    # adding the legacy role to a profile of the new path needs PassRole on the role: denied
    assert allowed(policy, Request("iam:AddRoleToInstanceProfile", EC2_PROFILE))
    to = {"iam:PassedToService": "ec2.amazonaws.com"}
    assert not allowed(policy, Request("iam:PassRole", LEGACY_ROLE, to))
    # and a SageMaker run role is not an EC2 one
    assert not allowed(policy, Request("iam:PassRole", SM_ROLE, to))


def test_each_caller_mints_roles_only_with_its_own_backends_boundary():
    ec2, sm = _policy("ec2-caller"), _policy("caller")
    ec2_b = {"iam:PermissionsBoundary": infra.boundary_arn(ACCOUNT, REGION, "ec2")}
    sm_b = {"iam:PermissionsBoundary": infra.boundary_arn(ACCOUNT, REGION, "sagemaker")}
    assert allowed(ec2, Request("iam:CreateRole", EC2_ROLE, ec2_b))
    assert not allowed(ec2, Request("iam:CreateRole", EC2_ROLE, sm_b))
    assert not allowed(ec2, Request("iam:CreateRole", SM_ROLE, ec2_b))
    assert allowed(sm, Request("iam:CreateRole", SM_ROLE, sm_b))
    assert not allowed(sm, Request("iam:CreateRole", SM_ROLE, ec2_b))
    assert not allowed(sm, Request("iam:CreateRole", EC2_ROLE, sm_b))
    # the path's boundary cannot be removed, by either caller, old path or new
    for policy in (ec2, sm):
        for role in (EC2_ROLE, SM_ROLE, LEGACY_ROLE):
            req = Request("iam:DeleteRolePermissionsBoundary", role)
            assert not allowed([policy, EVERYTHING], req)


def test_a_minted_ec2_role_does_nothing_unless_signed_on_an_instance():
    """A `*:*` role in the EC2 boundary, assumed through a trust naming the caller or
    another account: no request carries aws:EC2InstanceSourceVPC, so all are denied."""
    boundary = _policy("ec2-boundary")

    def can(action, resource, **ctx):
        return allowed(EVERYTHING, Request(action, resource, ctx), boundary)

    plan = f"{OBJ}/finetune/runs/ft-2/plan.json"
    assert not can("s3:GetObject", plan)
    assert not can("s3:GetObject", f"{OBJ}/finetune/datasets/d/train/x.rec")
    assert not can("s3:ListBucket", OBJ, **{"s3:prefix": "finetune/runs/"})
    assert can("s3:GetObject", plan, **ON_AN_INSTANCE)  # the instance itself still works
    # issue 34: one key alone (a context that names the VPC but no instance) is not enough
    for key in ON_AN_INSTANCE:
        assert not can("s3:GetObject", plan, **{key: ON_AN_INSTANCE[key]}), key


@pytest.mark.parametrize(
    ("kind", "allows", "denies"),
    [
        (
            "ec2-boundary",
            ["finetune/runs/ft-2/plan.json", "finetune/datasets/d/train/x.rec"],
            [
                "finetune/output/finetune-ft-2/output/model.tar.gz",
                "finetune/checkpoints/ft-2/epoch-1/params",
            ],
        ),
        (
            "sagemaker-boundary",
            ["finetune/checkpoints/ft-2/epoch-1/params", "finetune/datasets/d/train/x.rec"],
            ["finetune/runs/ft-2/plan.json", "finetune/runs/ft-2/hosts.json"],
        ),
    ],
)
def test_each_boundary_holds_its_backends_prefixes_only(kind, allows, denies):
    boundary = _policy(kind)
    ctx = ON_AN_INSTANCE if kind == "ec2-boundary" else AS_SAGEMAKER
    for key in allows:
        assert allowed(EVERYTHING, Request("s3:GetObject", f"{OBJ}/{key}", ctx), boundary), key
    for key in denies:
        for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
            req = Request(action, f"{OBJ}/{key}", ctx)
            assert not allowed(EVERYTHING, req, boundary), (action, key)
    # code is read, never written, by either kind of run
    code = f"{OBJ}/finetune/code/ft-2/sourcedir.tar.gz"
    assert allowed(EVERYTHING, Request("s3:GetObject", code, ctx), boundary)
    assert not allowed(EVERYTHING, Request("s3:PutObject", code, ctx), boundary)


def test_the_sagemaker_boundary_grants_no_session_manager_and_the_ec2_one_no_logs():
    sm, ec2 = _policy("sagemaker-boundary"), _policy("ec2-boundary")
    ssm = Request("ssmmessages:OpenDataChannel", "*")
    assert not allowed(EVERYTHING, ssm, sm)
    assert allowed(EVERYTHING, Request(ssm.action, "*", ON_AN_INSTANCE), ec2)
    logs = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs:log-stream:j"
    assert allowed(EVERYTHING, Request("logs:PutLogEvents", logs, AS_SAGEMAKER), sm)
    assert not allowed(EVERYTHING, Request("logs:PutLogEvents", logs, ON_AN_INSTANCE), ec2)


def test_the_perimeter_lets_only_aws_services_assume_run_roles():
    """The residual risk of finding 2 (a trust policy IAM cannot condition) closed by the
    organization policy we ship: only EC2 and SageMaker themselves may assume a run role."""
    from .iam_eval import DENY, decide

    perimeter = _policy("perimeter")
    for role in (EC2_ROLE, SM_ROLE):
        for principal_is_service in ("false", None):  # a user, a role, another account
            ctx = {} if principal_is_service is None else {"aws:PrincipalIsAWSService": "false"}
            assert decide([perimeter], Request("sts:AssumeRole", role, ctx)) == DENY
        service = Request("sts:AssumeRole", role, {"aws:PrincipalIsAWSService": "true"})
        assert decide([perimeter], service) != DENY
    other = f"{IAM}:role/someone-elses"
    assert decide([perimeter], Request("sts:AssumeRole", other, {})) != DENY
