"""Errors a user will meet when launching on SageMaker, injected in front of moto: each is a
clear message with its fix, and nothing is created or uploaded that should not be."""

from __future__ import annotations

import boto3
import pytest

from finetune import service, settings
from finetune.aws.errors import AccessError, CredentialsError, QuotaError, ThrottledError
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.backends.sagemaker.request import JobOptions, job_name
from finetune.backends.sagemaker.validate import PreflightError
from finetune.errors import CloudError
from tests.aws import helpers as h
from tests.aws.conftest import BUCKET, REGION

QUOTA = (
    "The account-level service limit 'ml.p3.8xlarge for spot training job usage' is 0 "
    "Instances, with current utilization of 0 Instances and a request delta of 1 Instances. "
    "Please use AWS Service Quotas to request an increase for this quota."
)


def _submit(tmp_path, dataset, options=None, **plan_args):
    plan = h.sm_plan(dataset, **plan_args)
    run = h.new_run(tmp_path, plan)
    return SageMakerBackend(options).submit(plan, run), run


def test_quota_names_the_quota_and_how_to_raise_it(cloud, tiny_dataset, tmp_path):
    cloud.fail("CreateTrainingJob", "ResourceLimitExceeded", QUOTA)
    plan = h.sm_plan(tiny_dataset, spot=True)
    ledger = h.ledger_at(tmp_path)
    with pytest.raises(QuotaError) as err:
        service.submit(plan, SageMakerBackend(), ledger, ledger.create(h.new_run(tmp_path, plan)))
    text = str(err.value)
    assert "'ml.p3.8xlarge for spot training job usage'" in text.split("To fix:")[1]
    assert "request-service-quota-increase --service-code sagemaker" in text
    assert f"--region {REGION}" in text
    assert len(cloud.requests("CreateTrainingJob")) == 1  # a quota is not retried
    (run,) = ledger.list()
    assert run.status == "failed" and "service quota" in run.exit_reason


def test_throttling_is_retried_by_us(cloud, tiny_dataset, tmp_path):
    cloud.fail("CreateTrainingJob", "ThrottlingException", "Rate exceeded", times=2)
    ref, _ = _submit(tmp_path, tiny_dataset)
    assert ref.startswith("arn:aws:sagemaker:")
    assert len(cloud.requests("CreateTrainingJob")) == 3 and len(cloud.delays) == 2


def test_endless_throttling_gives_a_message(cloud, tiny_dataset, tmp_path):
    cloud.fail("CreateTrainingJob", "ThrottlingException", "Rate exceeded", times=-1)
    with pytest.raises(ThrottledError, match=r"CreateTrainingJob.*all 5 attempts"):
        _submit(tmp_path, tiny_dataset)
    assert len(cloud.requests("CreateTrainingJob")) == 5


def test_a_lost_reply_is_not_a_name_clash(cloud, tiny_dataset, tmp_path):
    """The first CreateTrainingJob landed but its reply was lost; the retry's ResourceInUse
    finds this run's own job (its checkpoint prefix) and carries on."""
    cloud.fail("CreateTrainingJob", "InternalFailure", status=500, forward=True)
    cloud.fail("CreateTrainingJob", "ResourceInUse", "Training job names must be unique")
    ref, run = _submit(tmp_path, tiny_dataset)
    assert ref.endswith("/" + job_name(run.id))
    assert len(cloud.requests("CreateTrainingJob")) == 2


def test_job_name_in_use_by_another_job(cloud, tiny_dataset, tmp_path, monkeypatch):
    plan = h.sm_plan(tiny_dataset)
    run = h.new_run(tmp_path, plan)
    other = dict(
        TrainingJobName=job_name(run.id),
        RoleArn="arn:aws:iam::123456789012:role/other",
        AlgorithmSpecification={"TrainingImage": "x", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://elsewhere/"},
        ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        StoppingCondition={"MaxRuntimeInSeconds": 60},
        CheckpointConfig={"S3Uri": "s3://elsewhere/ck/"},
    )
    boto3.client("sagemaker", region_name=REGION).create_training_job(**other)
    cloud.fail("CreateTrainingJob", "ResourceInUse", "Training job names must be unique")
    with pytest.raises(CloudError, match="already exists") as err:
        SageMakerBackend().submit(plan, run)
    assert "--resume" in str(err.value)


def test_missing_role(cloud, tiny_dataset, tmp_path):
    message = "Could not assume role arn:aws:iam::123456789012:role/finetune-sagemaker."
    cloud.fail("CreateTrainingJob", "ValidationException", message)
    with pytest.raises(AccessError, match="cannot use the execution role") as err:
        _submit(tmp_path, tiny_dataset)
    assert "FINETUNE_ROLE_ARN" in str(err.value) and "iam:PassRole" in str(err.value)


def test_access_denied_on_the_bucket(cloud, tiny_dataset, tmp_path):
    cloud.fail("GetBucketLocation", "AccessDenied", "Access Denied", status=403)
    with pytest.raises(AccessError, match=f"GetBucketLocation on s3://{BUCKET}"):
        _submit(tmp_path, tiny_dataset)
    assert "PutObject" not in cloud.actions()


def test_expired_credentials(cloud, tiny_dataset, tmp_path):
    cloud.fail(
        "GetCallerIdentity",
        "ExpiredToken",
        "The security token included in the request is expired",
        status=403,
    )
    with pytest.raises(CredentialsError, match="expired") as err:
        _submit(tmp_path, tiny_dataset)
    assert "aws sso login" in str(err.value)


def test_no_credentials(cloud, tiny_dataset, tmp_path, monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(CredentialsError, match="No AWS credentials") as err:
        _submit(tmp_path, tiny_dataset)
    assert "aws configure" in str(err.value)
    assert cloud.calls == []


def test_bucket_in_another_region(cloud, tiny_dataset, tmp_path, monkeypatch):
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="us-bucket")
    monkeypatch.setenv("FINETUNE_BUCKET", "us-bucket")
    settings.get.cache_clear()
    with pytest.raises(PreflightError, match=r"us-bucket is in us-east-1.*eu-west-1"):
        _submit(tmp_path, tiny_dataset)


def test_missing_bucket_setting(cloud, tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.delenv("FINETUNE_BUCKET")
    settings.get.cache_clear()
    with pytest.raises(PreflightError, match="no S3 bucket") as err:
        _submit(tmp_path, tiny_dataset)
    assert "finetune infra deploy" in str(err.value) and cloud.calls == []


def test_image_not_pushed(cloud, tiny_dataset, tmp_path):
    boto3.client("ecr", region_name=REGION).batch_delete_image(
        repositoryName="finetune", imageIds=[{"imageTag": "0.1.0"}]
    )
    with pytest.raises(PreflightError, match="not in ECR") as err:
        _submit(tmp_path, tiny_dataset)
    assert "finetune image push" in str(err.value)


def test_secrets_and_bad_times_are_all_reported(cloud, tiny_dataset, tmp_path):
    opts = JobOptions(
        max_runtime=7200,
        max_wait=3600,
        environment={"HF_TOKEN": "hf_abc", "X": "AKIAABCDEFGHIJKLMNOP"},
    )
    with pytest.raises(PreflightError) as err:
        _submit(tmp_path, tiny_dataset, opts, spot=True)
    what = [p.what for p in err.value.problems]
    assert any("MaxWait" in p.fix for p in err.value.problems)
    assert any("HF_TOKEN" in w for w in what) and any("AWS access key" in w for w in what)
    assert "PutObject" not in cloud.actions() and "CreateTrainingJob" not in cloud.actions()


def test_max_eur_caps_the_runtime_or_refuses(cloud, tiny_dataset, tmp_path):
    # ml.p3.2xlarge in eu-west-1, estimated (no sourced ml.* price): EC2 3.305 USD/h x 1.25
    # = 4.13125 USD/h = 3.6979 EUR/h at 1.1172 USD/EUR (ECB, 2026-10-30)
    _submit(tmp_path, tiny_dataset, JobOptions(max_eur=1.0), instance="p3.2xlarge")
    sent = cloud.requests("CreateTrainingJob")[0].json
    assert sent["StoppingCondition"]["MaxRuntimeInSeconds"] == int(1.0 / (4.13125 / 1.1172) * 3600)
    with pytest.raises(PreflightError, match="more than --max-eur 1") as err:
        _submit(
            tmp_path,
            tiny_dataset,
            JobOptions(max_eur=1.0, max_runtime=3600),
            instance="p3.2xlarge",
        )
    assert "lower --max-runtime to 16 minutes" in str(err.value)  # 1 / 3.6979 h = 16.2 min
