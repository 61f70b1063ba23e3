"""SageMaker submit over HTTP: pre-flight, upload, and the CreateTrainingJob request we send
(asserted as captured on the wire; moto drops Environment/RetryStrategy and rewrites
MetricDefinitions in what it echoes)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.backends.sagemaker.request import JobOptions
from finetune.contracts.container import Layout
from finetune.contracts.metrics import METRIC_REGEXES
from finetune.service.tensorboard import locate
from tests.aws.conftest import BUCKET, REGION, ROLE
from tests.aws.helpers import new_run, sm_plan


def _sent(gw) -> dict:
    (call,) = gw.requests("CreateTrainingJob")
    return call.json


def test_submit_sends_the_full_request(cloud, tiny_dataset, tmp_path):
    plan = sm_plan(tiny_dataset, hosts=2, spot=True)
    run = new_run(tmp_path, plan)
    ref = SageMakerBackend(JobOptions(max_runtime=3600, max_wait=7200)).submit(plan, run)

    name = "finetune-" + run.id.removeprefix("ft-")
    assert ref == f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}"
    req = _sent(cloud)
    assert req["TrainingJobName"] == name and req["RoleArn"] == ROLE
    assert req["HyperParameters"] == plan.hyperparameters.to_strings()
    assert req["HyperParameters"]["hosts"] == "2"  # lr scales with 2 hosts x 4 GPUs
    spec = req["AlgorithmSpecification"]
    # the tag `finetune image push` pushed, pinned to its digest (issue 16)
    (pushed,) = boto3.client("ecr", region_name=REGION).describe_images(repositoryName="finetune")[
        "imageDetails"
    ]
    digest = pushed["imageDigest"]
    assert spec["TrainingImage"].endswith(f".dkr.ecr.{REGION}.amazonaws.com/finetune@{digest}")
    kept = json.loads((tmp_path / "runs" / run.id / "sagemaker" / "options.json").read_text())
    assert kept["image"] == spec["TrainingImage"]  # a resume runs the same image
    assert spec["TrainingInputMode"] == "File"
    assert {m["Name"]: m["Regex"] for m in spec["MetricDefinitions"]} == METRIC_REGEXES
    assert req["ResourceConfig"]["InstanceType"] == "ml.p3.8xlarge"
    assert req["ResourceConfig"]["InstanceCount"] == 2
    assert req["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert req["EnableManagedSpotTraining"] is True
    assert req["CheckpointConfig"] == {
        "S3Uri": f"s3://{BUCKET}/finetune/checkpoints/{run.id}/",
        "LocalPath": "/opt/ml/checkpoints",
    }
    assert req["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert req["Environment"]["FINETUNE_RUN_ID"] == run.id
    assert {"Key": "project", "Value": "finetune"} in req["Tags"]
    assert {"Key": "finetune:run-id", "Value": run.id} in req["Tags"]
    channels = {c["ChannelName"]: c for c in req["InputDataConfig"]}
    assert set(channels) == {"train", "validation"}
    for channel, c in channels.items():
        uri = c["DataSource"]["S3DataSource"]["S3Uri"]
        assert uri.startswith(f"s3://{BUCKET}/finetune/datasets/shapes-")
        assert uri.endswith(f"/{channel}/")
        assert c["ContentType"] == "application/x-recordio" and c["InputMode"] == "File"
        assert c["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "FullyReplicated"
    # the record kept with the run is the request itself
    record = tmp_path / "runs" / run.id / "sagemaker" / f"{name}-request.json"
    kept = json.loads(record.read_text())
    assert kept == req
    assert "TensorBoardOutputConfig" not in req  # the recipe names no tensorboard logger


def test_the_tensorboard_logger_has_sagemaker_upload_its_files(cloud, tiny_dataset, tmp_path):
    plan = sm_plan(tiny_dataset, overrides=["metric_logging.loggers=[tensorboard, mlflow]"])
    run = new_run(tmp_path, plan)
    backend = SageMakerBackend()
    assert backend.tensorboard_location(run) is None  # not submitted: nowhere yet
    backend.submit(plan, run)
    job = "finetune-" + run.id.removeprefix("ft-")
    prefix = f"s3://{BUCKET}/finetune/output/{job}/tensorboard/"
    # where the trainer writes them (the container contract) is what SageMaker collects
    local = str(Layout(Path("/opt/ml")).tensorboard_dir)
    assert _sent(cloud)["TensorBoardOutputConfig"] == {"LocalPath": local, "S3OutputPath": prefix}
    assert local == "/opt/ml/output/tensorboard"  # SageMaker's default LocalPath
    assert SageMakerBackend().tensorboard_location(run) == prefix  # from the stored options
    place = locate(run, SageMakerBackend())
    dest = tmp_path / "runs" / run.id / "tensorboard"
    assert place.in_s3 and place.location == prefix
    assert place.command == f"aws s3 sync {prefix} {dest} && tensorboard --logdir {dest}"


def test_on_demand_has_no_max_wait_and_uploads_once(cloud, tiny_dataset, tmp_path):
    plan = sm_plan(tiny_dataset)
    SageMakerBackend().submit(plan, new_run(tmp_path, plan))
    req = _sent(cloud)
    assert req["EnableManagedSpotTraining"] is False
    # a plan without an estimate: the 6 h every cloud backend gives then (was 2 h here)
    assert req["StoppingCondition"] == {"MaxRuntimeInSeconds": 6 * 3600}
    assert len(cloud.requests("PutObject")) == 6  # 3 files x 2 channels
    cloud.reset()
    SageMakerBackend().submit(plan, new_run(tmp_path, plan))
    assert cloud.requests("PutObject") == []  # same content, same prefix: skipped
    assert len(cloud.requests("CreateTrainingJob")) == 1


def test_order_nothing_is_spent_before_the_checks(cloud, tiny_dataset, tmp_path, monkeypatch):
    """An invalid role stops everything before upload or job creation."""
    monkeypatch.setenv("FINETUNE_ROLE_ARN", "finetune-sagemaker")
    from finetune import settings
    from finetune.backends.sagemaker.validate import PreflightError

    settings.get.cache_clear()
    plan = sm_plan(tiny_dataset)
    with pytest.raises(PreflightError, match="not an IAM role ARN"):
        SageMakerBackend().submit(plan, new_run(tmp_path, plan))
    assert not {"PutObject", "CreateTrainingJob"} & set(cloud.actions())
