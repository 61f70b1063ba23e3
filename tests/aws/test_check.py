"""`finetune check` against moto's server: a deployed account reads ok on every line; a fresh
one names each missing item with its fix and exits 1; --format json says the same.

moto's Service Quotas knows VPC quotas only: ``quotas`` below gives its in-process backend
the EC2 and SageMaker quotas an account has (moto's code, extended for the test)."""

from __future__ import annotations

import json

import boto3
import pytest
from typer.testing import CliRunner

from finetune.cli import app

from .gateway import ACCOUNT

REGION = "eu-west-1"
BUCKET = "finetune-check-bucket"
G_ON_DEMAND = "L-DB2E81BA"  # Running On-Demand G and VT instances (vCPUs)
SM_G5 = ("ml.g5.xlarge for training job usage", "L-1234ABCD")


@pytest.fixture
def quotas(aws, monkeypatch):
    """{(service, code): value} the account has; none unless a test sets them."""
    from moto.servicequotas.exceptions import NoSuchResource
    from moto.servicequotas.models import ServiceQuotasBackend
    from moto.servicequotas.responses import ServiceQuotasResponse

    values: dict[tuple[str, str], float] = {}
    names = {G_ON_DEMAND: "Running On-Demand G and VT instances", SM_G5[1]: SM_G5[0]}

    def quota(service: str, code: str) -> dict:
        return {"ServiceCode": service, "QuotaCode": code, "QuotaName": names.get(code, code),
                "Value": values[(service, code)], "Unit": "None"}  # fmt: skip

    def get_service_quota(self, service_code, quota_code):
        if (service_code, quota_code) not in values:
            raise NoSuchResource
        return quota(service_code, quota_code)

    def list_service_quotas(self):
        service = json.loads(self.body)["ServiceCode"]
        found = [quota(s, c) for s, c in values if s == service]
        return json.dumps({"Quotas": found})

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    monkeypatch.setattr(ServiceQuotasResponse, "list_service_quotas", list_service_quotas,
                        raising=False)  # fmt: skip
    return values


def _env(monkeypatch, **settings: str) -> None:
    from finetune import settings as conf

    for name in ("REGION", "BUCKET", "ROLE_ARN", "IMAGE", "EC2_IMAGE"):
        monkeypatch.delenv(f"FINETUNE_{name}", raising=False)
    for name, value in settings.items():
        monkeypatch.setenv(f"FINETUNE_{name.upper()}", value)
    conf.get.cache_clear()


def _deploy(quotas) -> str:
    """What `finetune infra deploy` and `finetune image push` leave: bucket, boundaries, the
    image; and quotas that fit a g5.xlarge."""
    boto3.client("s3", region_name=REGION).create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
    )
    iam = boto3.client("iam", region_name=REGION)
    for kind in ("ec2", "sagemaker"):
        statement = {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}
        document = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
        name = f"finetune-{kind}-run-boundary-{REGION}"
        iam.create_policy(PolicyName=name, Path="/finetune/", PolicyDocument=document)
    ecr = boto3.client("ecr", region_name=REGION)
    ecr.create_repository(repositoryName="finetune")
    manifest = (
        '{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"}'
    )
    ecr.put_image(repositoryName="finetune", imageManifest=manifest, imageTag="1.0")
    quotas[("ec2", G_ON_DEMAND)] = 8
    quotas[("sagemaker", SM_G5[1])] = 2
    return f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/finetune:1.0"


def _check(*args: str, columns: int = 80):
    return CliRunner().invoke(app, ["check", *args], env={"COLUMNS": str(columns)})


def test_a_deployed_account_is_ready(quotas, monkeypatch):
    image = _deploy(quotas)
    _env(monkeypatch, region=REGION, bucket=BUCKET, image=image)
    res = _check()
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, res.stdout
    assert [line for line in lines if not line.startswith("  ")] == [
        "account", "sagemaker", "ec2", "Ready for cloud runs."]  # fmt: skip
    assert all(line.split()[0] == "ok" for line in lines if line.startswith("  ") and
               not line.startswith("   "))  # fmt: skip
    text = " ".join(res.stdout.split())
    assert f"ok region {REGION}" in text and f"ok bucket {BUCKET} ({REGION})" in text
    assert "Running On-Demand G and VT instances (g5.xlarge): 8 vCPUs; one instance needs 4" in text
    assert "'ml.g5.xlarge for training job usage': 2 instances" in text
    record = json.loads(_check("--format", "json").stdout)
    assert record["ready"] is True and list(record["sections"]) == ["account", "sagemaker", "ec2"]
    names = [i["name"] for i in record["sections"]["account"]]
    assert names == ["credentials", "region", "bucket"]
    assert [i["name"] for i in record["sections"]["ec2"]] == ["image", "run role", "GPU quota"]


def test_a_fresh_account_names_every_missing_item_with_its_fix(quotas, monkeypatch):
    quotas[("ec2", G_ON_DEMAND)] = 0  # a new account: no GPU instances at all
    _env(monkeypatch, region=REGION, image=f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/finetune:9")
    res = _check("--instance", "g5.12xlarge")  # ec2's, by its name
    assert res.exit_code == 1, res.output
    assert max(len(line) for line in res.stdout.splitlines()) <= 80, res.stdout
    text = " ".join(res.stdout.split())
    assert "MISSING bucket no S3 bucket is set" in text and "fix: deploy the stack" in text
    assert "MISSING image" in text and "is not in ECR fix: push it" in text
    assert "MISSING run role the permissions boundary" in text
    assert f"finetune infra deploy --region {REGION}" in text
    assert "0 vCPUs; one instance needs 48" in text and "--quota-code L-DB2E81BA" in text
    assert "sagemaker" not in res.stdout.splitlines()  # --instance g5.* is ec2's
    assert text.endswith("Not ready: 4 missing (each with its fix above).")
    record = json.loads(_check("--instance", "g5.12xlarge", "--format", "json").stdout)
    assert record["ready"] is False
    missing = [
        i for items in record["sections"].values() for i in items if i["status"] == "missing"
    ]
    assert len(missing) == 4 and all(i["fix"] for i in missing)


def test_sagemaker_with_a_role_of_ones_own_and_an_unreadable_quota(quotas, monkeypatch):
    _deploy(quotas)
    quotas.clear()  # no SageMaker quota listed for this type: unknown, not missing
    role = f"arn:aws:iam::{ACCOUNT}:role/mine"
    _env(monkeypatch, region=REGION, bucket=BUCKET, role_arn=role)
    res = _check("--backend", "sagemaker")
    assert res.exit_code == 1, res.output  # the role does not exist
    text = " ".join(res.stdout.split())
    assert f"MISSING run role the role {role} does not exist" in text
    assert "unknown GPU quota 'ml.g5.xlarge for training job usage': not readable" in text
    boto3.client("iam").create_role(RoleName="mine", AssumeRolePolicyDocument="{}")
    res = _check("--backend", "sagemaker")
    assert res.exit_code == 0, res.output
    assert f"ok run role {role} (FINETUNE_ROLE_ARN)" in " ".join(res.stdout.split())


def test_without_a_region_the_backends_are_not_asked(aws, monkeypatch):
    _env(monkeypatch)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    res = _check()
    assert res.exit_code == 1, res.output
    text = " ".join(res.stdout.split())
    assert "MISSING region no AWS region is set" in text and "ok credentials" in text
    assert "unknown backend not checked: needs credentials and a region" in text
    bad = _check("--format", "yaml")
    assert bad.exit_code == 2 and "To fix:" in bad.output


def test_the_local_backend_needs_no_account(aws, monkeypatch):
    _env(monkeypatch)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    res = _check("--backend", "local")
    assert res.exit_code == 0, res.output
    assert "trains here: needs no cloud account" in res.stdout
    assert res.stdout.splitlines()[-1] == "Ready." and "cloud runs" not in res.stdout
    unknown = _check("--backend", "lokal")
    assert unknown.exit_code == 2 and "did you mean" in unknown.output.lower(), unknown.output


def test_unknown_items_are_never_called_ready_and_name_the_permission(quotas, gw, monkeypatch):
    """Issue 49, S5-6: a caller AWS will not let read the boundary or the quota is told
    exactly which permission each needs (the stack's caller policies grant both), and the
    verdict is not "Ready" while anything is unknown (nothing missing: exit 0)."""
    image = _deploy(quotas)
    _env(monkeypatch, region=REGION, bucket=BUCKET, image=image)
    gw.fail("GetPolicy", "AccessDenied", status=403, times=-1)
    gw.fail("GetServiceQuota", "AccessDeniedException", status=400, times=-1)
    res = _check("--backend", "ec2", columns=200)
    assert res.exit_code == 0, res.output
    assert "Ready" not in res.stdout
    text = " ".join(res.stdout.split())
    boundary = f"arn:aws:iam::{ACCOUNT}:policy/finetune/finetune-ec2-run-boundary-{REGION}"
    assert f"this needs iam:GetPolicy on {boundary}" in text
    quota = f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:ec2/{G_ON_DEMAND}"
    assert f"this needs servicequotas:GetServiceQuota on {quota}" in text
    assert text.endswith("Not confirmed: 2 unknown, nothing missing (each with its fix above).")
    record = json.loads(_check("--backend", "ec2", "--format", "json").stdout)
    assert (record["ready"], record["missing"], record["unknown"]) == (False, 0, 2)


def test_the_stacks_caller_policies_grant_what_check_reads():
    """... and the policies grant exactly those reads: each caller its own boundary, the EC2
    caller every quota code the pre-flight may read, the SageMaker caller the list call."""
    from finetune.aws import infra
    from finetune.backends.ec2.setup import quota
    from tests.security.iam_eval import Request, allowed

    names = infra.Names(ACCOUNT, REGION, BUCKET, extra={"VpcId": "vpc-0a1b2c3d"})
    for caller, kind in (("ec2-caller", "ec2"), ("caller", "sagemaker")):
        policy = infra.render(infra.policy_document(caller), names)
        boundary = infra.boundary_arn(ACCOUNT, REGION, kind)
        assert allowed(policy, Request("iam:GetPolicy", boundary))
        other = infra.boundary_arn(ACCOUNT, REGION, "sagemaker" if kind == "ec2" else "ec2")
        assert not allowed(policy, Request("iam:GetPolicy", other))
        assert not allowed(policy, Request("iam:GetPolicy", f"arn:aws:iam::{ACCOUNT}:policy/x"))
    ec2 = infra.render(infra.policy_document("ec2-caller"), names)
    for code in quota.quota_codes():
        arn = f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:ec2/{code}"
        assert allowed(ec2, Request("servicequotas:GetServiceQuota", arn)), code
    other = f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:ec2/L-0THER"
    assert not allowed(ec2, Request("servicequotas:GetServiceQuota", other))
    sm = infra.render(infra.policy_document("caller"), names)
    here = {"aws:RequestedRegion": REGION}
    assert allowed(sm, Request("servicequotas:ListServiceQuotas", "*", here))
