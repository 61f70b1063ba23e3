"""`launch --backend sagemaker --subnet --security-group --kms-key` with a per-run role (issue
22): the role finetune sends grants the job's network interfaces and key use -- replayed
with the stack's boundary -- and a launch without those options grants neither."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from finetune import settings
from finetune.aws import infra
from finetune.cli import app
from tests.aws.conftest import BUCKET, REGION
from tests.aws.gateway import ACCOUNT
from tests.security.iam_eval import AS_SAGEMAKER, Request, allowed

KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
EC2 = f"arn:aws:ec2:{REGION}:{ACCOUNT}"


@pytest.fixture
def own_roles(cloud, monkeypatch):
    monkeypatch.delenv("FINETUNE_ROLE_ARN")
    settings.get.cache_clear()
    return cloud


def _launch(tiny_dataset, *extra: str):
    args = ["launch", "smoke-resnet18", "--backend", "sagemaker", "--instance", "p3.2xlarge"]
    res = CliRunner().invoke(app, [*args, "--dataset", str(tiny_dataset), "--detach", *extra])
    assert res.exit_code == 0, res.output


def _sent_role(cloud) -> dict:
    return json.loads(cloud.requests("PutRolePolicy")[-1].form["PolicyDocument"])


def _can(role, action, resource, **ctx) -> bool:
    fence = {"SageMakerSubnets": ["subnet-0a1b"], "SageMakerSecurityGroups": ["sg-0c2d"]}
    names = infra.Names(ACCOUNT, REGION, BUCKET, extra={"VpcId": "vpc-0a1b2c3d", **fence})
    return allowed(
        role,
        Request(action, resource, {**AS_SAGEMAKER, **ctx}),
        infra.render(infra.policy_document("sagemaker-boundary"), names),
    )


def test_a_vpc_and_kms_job_gets_what_it_needs_and_no_more(own_roles, tiny_dataset):
    vpc = ["--subnet", "subnet-0a1b", "--security-group", "sg-0c2d", "--kms-key", KEY]
    _launch(tiny_dataset, *vpc)
    role = _sent_role(own_roles)
    vpc = {"ec2:Vpc": f"{EC2}:vpc/vpc-0a1b2c3d", "ec2:Subnet": f"{EC2}:subnet/subnet-0a1b"}
    assert _can(role, "ec2:CreateNetworkInterface", f"{EC2}:subnet/subnet-0a1b", **vpc)
    assert _can(role, "ec2:CreateNetworkInterface", f"{EC2}:security-group/sg-0c2d", **vpc)
    assert _can(role, "ec2:DeleteNetworkInterface", f"{EC2}:network-interface/eni-1", **vpc)
    assert _can(role, "ec2:DescribeVpcs", "*", **{"aws:RequestedRegion": REGION})
    assert not _can(role, "ec2:CreateNetworkInterface", f"{EC2}:subnet/subnet-other")
    via = {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}
    assert _can(role, "kms:GenerateDataKey", KEY, **via) and _can(role, "kms:Decrypt", KEY, **via)
    assert _can(role, "kms:CreateGrant", KEY, **{"kms:GrantIsForAWSResource": "true"})
    assert not _can(role, "kms:Decrypt", KEY.replace("1234abcd", "99999999"), **via)


def test_without_those_options_the_role_grants_neither(own_roles, tiny_dataset):
    _launch(tiny_dataset)
    role = _sent_role(own_roles)
    assert not _can(role, "ec2:CreateNetworkInterface", f"{EC2}:subnet/subnet-0a1b")
    assert not _can(role, "ec2:DescribeVpcs", "*", **{"aws:RequestedRegion": REGION})
    via = {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}
    assert not _can(role, "kms:Decrypt", KEY, **via)
