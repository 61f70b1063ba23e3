"""infra/: the CloudFormation template passes cfn-lint offline, has the security properties
the issue asks for, and its caller policy grants exactly the AWS actions finetune calls --
measured on the wire while the real commands run."""

from __future__ import annotations

import csv
import fnmatch
import io
import json

import pytest
import yaml
from typer.testing import CliRunner

from finetune.aws import infra
from finetune.aws.errors import ThrottledError
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.cli import app

from . import helpers as h
from .conftest import BUCKET, REGION
from .test_image_push import fake_docker

ACCOUNT = "123456789012"


@pytest.fixture(scope="module")
def template() -> dict:
    return yaml.safe_load(infra.template_text())


def _statements(doc: dict) -> list[dict]:
    return [
        {**s, "Action": [s["Action"]] if isinstance(s["Action"], str) else s["Action"]}
        for s in doc["Statement"]
    ]


def test_cfn_lint_is_clean_offline():
    from cfnlint.api import lint

    matches = lint(infra.template_text(), regions=["us-east-1", "eu-west-1"])
    assert [str(m) for m in matches] == []


def test_bucket_is_private_encrypted_tls_only_and_cleans_up_uploads(template):
    r = template["Resources"]
    props = r["Bucket"]["Properties"]
    assert set(props["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(props["PublicAccessBlockConfiguration"]) == 4
    (enc,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert enc["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")
    rules = props["LifecycleConfiguration"]["Rules"]
    assert any(x["Status"] == "Enabled" and "AbortIncompleteMultipartUpload" in x for x in rules)
    (deny,) = r["BucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "s3:*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert r["Repository"]["Type"] == "AWS::ECR::Repository"


def test_policy_files_are_the_templates_documents(template):
    r = template["Resources"]
    assert infra.policy_document("caller") == r["CallerPolicy"]["Properties"]["PolicyDocument"]
    for kind, name in (("ec2", "Ec2RunBoundary"), ("sagemaker", "SageMakerRunBoundary")):
        doc = r[name]["Properties"]["PolicyDocument"]
        assert infra.policy_document(f"{kind}-boundary") == doc
    ec2 = r["Ec2CallerPolicy"]["Properties"]["PolicyDocument"]
    assert infra.policy_document("ec2-caller") == ec2


def test_pass_role_is_for_run_roles_and_sagemaker_only(template):
    (stmt,) = [
        s
        for s in _statements(infra.policy_document("caller"))
        if "iam:PassRole" in s["Action"] and s["Effect"] == "Allow"
    ]
    assert stmt["Action"] == ["iam:PassRole"]
    assert stmt["Resource"]["Fn::Sub"].endswith(":role/finetune-bounded/sagemaker/finetune-run-*")
    assert stmt["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert "ExecutionRole" not in template["Resources"]  # no role shared by every job


# What each API operation we call needs in IAM (the AWS service authorization reference).
IAM_FOR = {
    "GetBucketLocation": ["s3:GetBucketLocation"],
    "ListObjectsV2": ["s3:ListBucket"],
    "HeadObject": ["s3:GetObject"],
    "GetObject": ["s3:GetObject"],
    "PutObject": ["s3:PutObject"],
    "CreateMultipartUpload": ["s3:PutObject"],
    "UploadPart": ["s3:PutObject"],
    "CompleteMultipartUpload": ["s3:PutObject"],
    "AbortMultipartUpload": ["s3:AbortMultipartUpload"],
    "CreateTrainingJob": ["sagemaker:CreateTrainingJob", "sagemaker:AddTags", "iam:PassRole"],
    "DescribeTrainingJob": ["sagemaker:DescribeTrainingJob"],
    "StopTrainingJob": ["sagemaker:StopTrainingJob"],
    "DescribeLogStreams": ["logs:DescribeLogStreams"],
    "GetLogEvents": ["logs:GetLogEvents"],
    "DescribeImages": ["ecr:DescribeImages"],
    "GetAuthorizationToken": ["ecr:GetAuthorizationToken"],
    "GetCallerIdentity": [],  # needs no permission
    "CreateRole": ["iam:CreateRole", "iam:TagRole"],  # the run's own role, tagged
    "PutRolePolicy": ["iam:PutRolePolicy"],
    "DeleteRolePolicy": ["iam:DeleteRolePolicy"],
    "DeleteRole": ["iam:DeleteRole"],
    "DescribeStacks": ["cloudformation:DescribeStacks"],  # the stack's limits, before a launch
    "ListRoles": ["iam:ListRoles"],  # cleanup: run roles of ended jobs
    "ListTrainingJobs": ["sagemaker:ListTrainingJobs"],
    # `finetune check` (issue 49, S5-6): bucket, boundary, training-job quota
    "HeadBucket": ["s3:ListBucket"],
    "GetPolicy": ["iam:GetPolicy"],
    "ListServiceQuotas": ["servicequotas:ListServiceQuotas"],
}
# `docker push` calls these itself (not through boto3, so not seen at the gateway).
DOCKER_PUSH = {
    "ecr:BatchCheckLayerAvailability",
    "ecr:InitiateLayerUpload",
    "ecr:UploadLayerPart",
    "ecr:CompleteLayerUpload",
    "ecr:PutImage",
}


def test_caller_policy_grants_exactly_what_the_code_calls(
    cloud, tiny_dataset, tmp_path, monkeypatch
):
    from finetune import settings

    monkeypatch.delenv("FINETUNE_ROLE_ARN")  # a role per run: what the stack sets up
    settings.get.cache_clear()
    _exercise_everything(cloud, tiny_dataset, tmp_path, monkeypatch)
    called = {c.action for c in cloud.ours()}
    assert called <= set(IAM_FOR), f"unmapped calls: {called - set(IAM_FOR)}"
    needed = {a for op in called for a in IAM_FOR[op]} | DOCKER_PUSH
    policy = infra.render(infra.policy_document("caller"), _names())
    granted = {a for s in _statements(policy) if s["Effect"] == "Allow" for a in s["Action"]}
    assert granted == needed
    grants = _grants(policy)
    for call in cloud.ours():  # ... and on the resources the calls touched
        for action in IAM_FOR[call.action]:
            resource = _resource_of(call, action)
            assert resource and _allowed(grants, action, resource), (call.action, resource)


def _exercise_everything(cloud, dataset, tmp_path, monkeypatch):
    """The commands a user runs: launch (upload, create, follow, logs, metrics), stop, a
    failed multipart upload (abort), image push."""
    from finetune import service
    from finetune.aws import s3upload as up
    from tests.backends.sagemaker.test_logs_metrics import _put_logs, _put_output

    monkeypatch.setattr(SageMakerBackend, "POLL_SECONDS", 0)
    cloud.script(h.ON_DEMAND)
    run_launch = CliRunner().invoke(
        app,
        [
            "launch",
            "smoke-resnet18",
            "--backend",
            "sagemaker",
            "--dataset",
            str(dataset),
            "--instance",
            "p3.2xlarge",
            "--detach",
        ],
    )
    assert run_launch.exit_code == 0, run_launch.output
    ledger = h.ledger_at(tmp_path)
    plan = h.sm_plan(dataset)
    be = SageMakerBackend(poll_seconds=0)
    run = service.submit(plan, be, ledger, ledger.create(h.new_run(tmp_path, plan)))
    job = run.backend_ref.rsplit("/", 1)[1]
    cloud.script(
        [h.step("InProgress", "Training", 60), h.step("InProgress", "Training", 61)], job=job
    )
    _put_logs(job, "algo-1", ["hello"])
    service.sync(run, be, ledger)
    be.logs(run, 0)
    be.stop(run)
    cloud.script(h.ON_DEMAND[-1:], job=job)
    _put_output(job, "")
    service.sync(run, be, ledger)
    big = tmp_path / "big.rec"
    big.write_bytes(b"x" * (6 * 2**20))
    f = up.UploadFile(big, "finetune/datasets/big-1/train/big.rec", "0" * 64, big.stat().st_size)
    cloud.fail("UploadPart", "SlowDown", status=503, times=-1)
    with pytest.raises(ThrottledError):
        up.upload_dataset(
            be._aws(REGION).client("s3"),
            up.DatasetUpload(BUCKET, "finetune/datasets/big-1/", (f,)),
            part_size=5 * 2**20,
        )
    fake_docker(tmp_path, monkeypatch)
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    pushed = CliRunner().invoke(app, ["image", "push", "--context", str(tmp_path)])
    assert pushed.exit_code == 0, pushed.output
    be.remove(be.orphans(set(), 0))  # what `finetune cleanup` asks of this backend
    checked = CliRunner().invoke(app, ["check", "--backend", "sagemaker"])
    assert "could not be read" not in checked.output, checked.output


def _names() -> infra.Names:
    role = f"arn:aws:iam::{ACCOUNT}:role/finetune-sagemaker"
    return infra.Names(account=ACCOUNT, region=REGION, bucket=BUCKET, role_arn=role)


def _grants(policy: dict) -> list[tuple[str, str]]:
    out = []
    for s in _statements(policy):
        if s["Effect"] != "Allow":
            continue
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        out += [(a, r) for a in s["Action"] for r in resources]
    return out


def _allowed(grants, action: str, resource: str) -> bool:
    return any(a == action and fnmatch.fnmatchcase(resource, r) for a, r in grants)


def _resource_of(call, action: str) -> str:
    """The ARN ``action`` of an API call acts on, as IAM evaluates it."""
    if action == "iam:PassRole":
        return call.json["RoleArn"]
    if call.action in ("ListRoles", "ListTrainingJobs", "ListServiceQuotas"):
        return "*"
    if call.action == "GetPolicy":
        return call.form["PolicyArn"]
    if call.service == "iam":
        return f"arn:aws:iam::{ACCOUNT}:role/finetune-bounded/sagemaker/{call.form['RoleName']}"
    if call.service == "cloudformation":
        return f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{call.form['StackName']}/id"
    logs = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs"
    if call.service == "s3":
        bucket, _, key = call.path.lstrip("/").partition("/")
        return f"arn:aws:s3:::{bucket}/{key}" if key else f"arn:aws:s3:::{bucket}"
    if call.service == "sagemaker":
        return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{call.json['TrainingJobName']}"
    if call.service == "logs":
        stream = call.json.get("logStreamName")
        return f"{logs}:log-stream:{stream}" if stream else logs
    if call.action == "DescribeImages":
        return f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/{call.json['repositoryName']}"
    return "*"


@pytest.mark.filterwarnings("ignore:Tried to parse")  # moto's CFN lacks AWS::S3::BucketPolicy
def test_infra_deploy_prints_the_settings(gw):
    res = CliRunner().invoke(app, ["infra", "deploy", "--region", REGION])
    assert res.exit_code == 0, res.output
    assert "export FINETUNE_BUCKET=" in res.output and "FINETUNE_ROLE_ARN" not in res.output
    assert "CallerPolicyArn" in res.output and "Ec2CallerPolicyArn" in res.output
    again = CliRunner().invoke(app, ["infra", "deploy", "--region", REGION])  # an update
    assert again.exit_code == 0, again.output
    as_json = CliRunner().invoke(app, ["infra", "deploy", "--region", REGION, "--format", "json"])
    outputs = json.loads(as_json.stdout)  # the outputs only: the rest went to stderr
    assert {"CallerPolicyArn", "Ec2CallerPolicyArn"} <= set(outputs)
    as_csv = CliRunner().invoke(app, ["infra", "deploy", "--region", REGION, "--format", "csv"])
    assert dict(csv.reader(io.StringIO(as_csv.stdout))) == {"key": "value", **outputs}
    (create,) = gw.requests("CreateStack")
    assert create.form["Capabilities.member.1"] == "CAPABILITY_NAMED_IAM"


def test_infra_print():
    res = CliRunner().invoke(app, ["infra", "print"])
    assert res.exit_code == 0 and res.output.startswith("# finetune")
    res = CliRunner().invoke(
        app,
        [
            "infra",
            "print",
            "--policy",
            "caller",
            "--account",
            ACCOUNT,
            "--region",
            REGION,
            "--bucket",
            BUCKET,
        ],
    )
    doc = json.loads(res.output)
    assert "Fn::Sub" not in res.output and f"arn:aws:s3:::{BUCKET}" in res.output
    assert doc["Version"] == "2012-10-17"
    res = CliRunner().invoke(app, ["infra", "print", "--policy", "admin"])
    kinds = "caller, ec2-caller, ec2-boundary, sagemaker-boundary, perimeter"
    assert res.exit_code == 2 and kinds in res.output
