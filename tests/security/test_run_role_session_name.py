"""Issue 49, N2: the chosen-session-name attack on SageMaker run roles, replayed through the
shipped policies (rendered as `finetune infra print` does) with the project's evaluator.

A caller mints a role under /finetune-bounded/sagemaker/ with the SageMaker boundary and a
trust naming itself (IAM has no condition key on a new role's trust), assumes it with the
session name ``SageMaker`` and so passes the boundary's only guard, OnlyAsSageMakersSession.
Both caller policies now deny their holders every STS call on roles under /finetune-bounded/,
so that assumption fails; SageMaker's own job flow is unchanged. A role minted to trust a
principal without a caller policy (another account) is what the perimeter RCP still closes.
"""

from __future__ import annotations

import pytest

from finetune.aws import infra
from finetune.backends.sagemaker import runrole
from finetune.backends.sagemaker.request import job_name

from .iam_eval import AS_SAGEMAKER, DENY, Request, allowed, assume_allowed, decide

ACCOUNT, REGION, BUCKET = "123456789012", "eu-west-1", "finetune-test-bucket"
RUN, VICTIM = "ft-20261128-101500-a3f9", "ft-20261128-093000-b4e0"
MALLORY = f"arn:aws:iam::{ACCOUNT}:user/mallory"  # holds a caller policy
AS_MALLORY = {"aws:PrincipalArn": MALLORY, "aws:PrincipalIsAWSService": "false"}
MINTED = f"arn:aws:iam::{ACCOUNT}:role/finetune-bounded/sagemaker/finetune-run-x"
EC2_MINTED = f"arn:aws:iam::{ACCOUNT}:role/finetune-bounded/ec2/finetune-run-x"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/finetune-bounded/sagemaker/finetune-run-{RUN}"
OBJ = f"arn:aws:s3:::{BUCKET}/finetune"
THEIRS = [
    ("s3:GetObject", f"{OBJ}/checkpoints/{VICTIM}/epoch-3/params"),
    ("s3:PutObject", f"{OBJ}/checkpoints/{VICTIM}/epoch-3/params"),
    ("s3:DeleteObject", f"{OBJ}/checkpoints/{VICTIM}/epoch-3/params"),
    ("s3:PutObject", f"{OBJ}/output/{job_name(VICTIM)}/output/model.tar.gz"),
]
STS = [
    "sts:AssumeRole",
    "sts:AssumeRoleWithSAML",
    "sts:AssumeRoleWithWebIdentity",
    "sts:SetContext",
    "sts:SetSourceIdentity",
    "sts:TagSession",
]
EVERYTHING = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/finetune@sha256:" + "a" * 64


def _policy(kind: str) -> dict:
    names = infra.Names(ACCOUNT, REGION, BUCKET, extra={"VpcId": "vpc-0a1b2c3d"})
    return infra.render(infra.policy_document(kind), names)


def _trusting(principal: str) -> dict:
    """The trust a minting caller gives the role: the principal, for every STS action."""
    stmt = {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": STS}
    return {"Version": "2012-10-17", "Statement": [stmt]}


def _assume(action: str, role: str, ctx: dict) -> Request:
    return Request(action, role, {**ctx, "sts:RoleSessionName": "SageMaker"})


@pytest.mark.parametrize("caller", ["caller", "ec2-caller"])
@pytest.mark.parametrize("role", [MINTED, EC2_MINTED])
def test_a_caller_cannot_assume_a_run_role_that_trusts_it(caller, role):
    policy = _policy(caller)
    for action in STS:
        req = _assume(action, role, AS_MALLORY)
        assert decide([policy], req) == DENY, action  # explicit: no trust can outweigh it
        assert not assume_allowed([policy], _trusting(MALLORY), MALLORY, req), action
        account_root = _trusting(f"arn:aws:iam::{ACCOUNT}:root")
        assert not assume_allowed([policy, EVERYTHING], account_root, MALLORY, req), action
    # IAM has no condition key on a trust policy: minting the role stays allowed ...
    bound = {"iam:PermissionsBoundary": infra.boundary_arn(ACCOUNT, REGION, "sagemaker")}
    if caller == "caller" and role == MINTED:
        assert allowed(policy, Request("iam:CreateRole", role, bound))


def test_what_the_session_name_would_have_reached():
    """... and the session ``SageMaker`` of such a role would pass the boundary: what the Deny
    above keeps from the caller (the review's replay, ALLOW on another run's objects)."""
    boundary = _policy("sagemaker-boundary")
    minted_session = {"aws:userid": "AROAMINTEDROLEID:SageMaker"}
    for action, resource in THEIRS:
        assert allowed(EVERYTHING, Request(action, resource, minted_session), boundary)


def test_the_normal_sagemaker_job_is_allowed_from_end_to_end():
    caller, boundary = _policy("caller"), _policy("sagemaker-boundary")
    bound = {"iam:PermissionsBoundary": infra.boundary_arn(ACCOUNT, REGION, "sagemaker")}
    assert allowed(caller, Request("iam:CreateRole", ROLE, bound))
    assert allowed(caller, Request("iam:PutRolePolicy", ROLE, bound))
    to_sagemaker = {"iam:PassedToService": "sagemaker.amazonaws.com"}
    assert allowed(caller, Request("iam:PassRole", ROLE, to_sagemaker))
    job = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job_name(RUN)}"
    ctx = {"sagemaker:InstanceTypes": ["ml.g5.xlarge"], "sagemaker:MaxRuntimeInSeconds": "3600"}
    assert allowed(caller, Request("sagemaker:CreateTrainingJob", job, ctx))
    # SageMaker assumes the run's role: its trust names the service, which holds no caller
    # policy; the perimeter lets AWS services through
    service = {"aws:SourceAccount": ACCOUNT, "aws:PrincipalIsAWSService": "true"}
    assume = Request("sts:AssumeRole", ROLE, service)
    assert assume_allowed([], runrole.trust(ACCOUNT), "sagemaker.amazonaws.com", assume)
    assert decide([_policy("perimeter")], assume) != DENY
    # the job's session (SageMaker names it) uses its own prefixes, never another run's
    own = runrole.policy(RUN, BUCKET, ["finetune/datasets/shapes-ec0c329c5a10/"], IMAGE, REGION,
                         ACCOUNT)  # fmt: skip
    checkpoint = f"{OBJ}/checkpoints/{RUN}/epoch-3/params"
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        assert allowed(own, Request(action, checkpoint, AS_SAGEMAKER), boundary), action
    for action, resource in THEIRS:
        assert not allowed(own, Request(action, resource, AS_SAGEMAKER), boundary), resource


def test_a_role_trusting_a_principal_without_a_caller_policy_needs_the_perimeter():
    """What the caller policies cannot close: a role minted to trust another account (whose
    principals hold no finetune policy). The perimeter RCP denies it, whatever the name."""
    stranger = "arn:aws:iam::999988887777:user/eve"
    req = _assume("sts:AssumeRole", MINTED, {"aws:PrincipalArn": stranger,
                                              "aws:PrincipalIsAWSService": "false"})  # fmt: skip
    assert assume_allowed([EVERYTHING], _trusting(stranger), stranger, req)  # no RCP: ALLOW
    assert decide([_policy("perimeter")], req) == DENY
