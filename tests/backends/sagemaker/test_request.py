"""The CreateTrainingJob request as a pure function of the Plan: valid against the SageMaker
API model botocore ships (offline), and every field the issue asks for."""

from __future__ import annotations

import pytest

from finetune.aws.image import default_image
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker.options import SageMakerOptions
from finetune.contracts.metrics import METRIC_REGEXES
from finetune.plan import Resources, build_plan

ROLE = "arn:aws:iam::123456789012:role/finetune-sagemaker"
IMAGE = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/finetune:0.1.0"
CHANNELS = {
    "train": "s3://b/finetune/datasets/shapes-abc/train/",
    "validation": "s3://b/finetune/datasets/shapes-abc/validation/",
}


def plan(dataset, hosts=1, spot=False):
    res = Resources(
        backend="sagemaker",
        instance_type="p3.8xlarge",
        hosts=hosts,
        devices_per_host=4,
        device="gpu",
        spot=spot,
    )
    return build_plan("smoke-resnet18", dataset, res)


def request(dataset, hosts=1, spot=False, **opts):
    options = rq.JobOptions(region="eu-west-1", bucket="b", role_arn=ROLE, image=IMAGE, **opts)
    return rq.training_request(
        plan(dataset, hosts, spot), "ft-1-a", "finetune-1-a", CHANNELS, options, 10 * 2**30
    )


def _validate(req: dict) -> None:
    """botocore's own parameter validation against the bundled SageMaker model: no network."""
    import botocore.session
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model("sagemaker")
    validate_parameters(req, model.operation_model("CreateTrainingJob").input_shape)


@pytest.mark.parametrize(("hosts", "spot"), [(1, False), (2, True)])
def test_request_is_valid_for_the_api(tiny_dataset, hosts, spot):
    vpc = dict(subnet=("subnet-1",), security_group=("sg-1",))
    _validate(request(tiny_dataset, hosts, spot, kms_key="alias/k", **vpc))


def test_a_request_with_tensorboard_output_is_valid_and_shown(tiny_dataset):
    logged = build_plan(
        "smoke-resnet18",
        tiny_dataset,
        plan(tiny_dataset).resources,
        ["metric_logging.loggers=[tensorboard]"],
    )
    options = rq.JobOptions(region="eu-west-1", bucket="b", role_arn=ROLE, image=IMAGE)
    req = rq.training_request(logged, "ft-1-a", "finetune-1-a", CHANNELS, options, 2**30)
    _validate(req)
    where = "s3://b/finetune/output/finetune-1-a/tensorboard/"
    assert req["TensorBoardOutputConfig"]["S3OutputPath"] == where
    assert ("tensorboard", where) in rq.summary_rows(req)
    assert "TensorBoardOutputConfig" not in request(tiny_dataset)


def test_request_fields(tiny_dataset):
    req = request(tiny_dataset, hosts=2, spot=True, max_runtime=3600)
    assert req["ResourceConfig"] == {
        "InstanceType": "ml.p3.8xlarge",
        "InstanceCount": 2,
        "VolumeSizeInGB": 50,
    }
    assert req["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert req["HyperParameters"]["hosts"] == "2" and req["HyperParameters"]["lr"] == "0.08"
    assert all(isinstance(v, str) for v in req["HyperParameters"].values())
    metrics = req["AlgorithmSpecification"]["MetricDefinitions"]
    assert {m["Name"]: m["Regex"] for m in metrics} == METRIC_REGEXES
    assert req["OutputDataConfig"] == {"S3OutputPath": "s3://b/finetune/output/"}
    assert req["CheckpointConfig"]["S3Uri"] == "s3://b/finetune/checkpoints/ft-1-a/"
    assert "VpcConfig" not in req


def test_optional_vpc_and_kms(tiny_dataset):
    req = request(tiny_dataset, kms_key="alias/k", subnet=("s-1",), security_group=("sg-1",))
    assert req["VpcConfig"] == {"Subnets": ["s-1"], "SecurityGroupIds": ["sg-1"]}
    assert req["OutputDataConfig"]["KmsKeyId"] == "alias/k"
    assert req["ResourceConfig"]["VolumeKmsKeyId"] == "alias/k"


def test_every_channel_is_recordio_file_mode_under_a_slash_prefix(tiny_dataset):
    options = rq.JobOptions(bucket="b", role_arn=ROLE, image=IMAGE)
    bare = {"train": "s3://b/x/train", "validation": "s3://b/x/validation"}
    req = rq.training_request(plan(tiny_dataset), "r", "n", bare, options, 0)
    for c in req["InputDataConfig"]:
        assert c["DataSource"]["S3DataSource"]["S3Uri"].endswith("/")
        assert c["ContentType"] == "application/x-recordio" and c["InputMode"] == "File"


def test_names_images_and_volumes():
    assert rq.job_name("ft-20261122-101500-a3f9") == "finetune-20261122-101500-a3f9"
    assert rq.job_name("ft-20261122-101500-a3f9", 2) == "finetune-20261122-101500-a3f9-r2"
    assert rq.sagemaker_instance("p3.8xlarge") == rq.sagemaker_instance("ml.p3.8xlarge")
    assert default_image("1", "cn-north-1", "t").endswith(".amazonaws.com.cn/finetune:t")
    assert rq.volume_gb(0) == 50 and rq.volume_gb(100 * 2**30) == 180


def test_options_round_trip():
    opts = rq.JobOptions(region="r", subnet=("a",), environment={"K": "v"}, max_eur=2.5)
    assert rq.JobOptions.from_dict(opts.to_dict()) == opts
    assert rq.JobOptions.from_dict({**opts.to_dict(), "from_the_future": 1}) == opts
    assert opts.runtime_seconds() == rq.DEFAULT_MAX_RUNTIME_S
    assert opts.wait_seconds() == 2 * rq.DEFAULT_MAX_RUNTIME_S


def test_summary_lines(tiny_dataset):
    text = "\n".join(rq.summary_lines(request(tiny_dataset, hosts=2, spot=True)))
    assert "2 x ml.p3.8xlarge" in text and "managed spot" in text and "max wait" in text
    assert CHANNELS["validation"] in text


def test_metric_definitions_match_the_trainers_log_lines(tiny_dataset):
    import re

    from finetune.contracts.metrics import EpochMetrics

    event = EpochMetrics(
        epoch=3,
        samples=80,
        samples_per_sec=812.25,
        epoch_seconds=1.5,
        train_loss=0.75,
        train_acc=0.5,
        val_acc=0.625,
        lr=0.04,
    )
    line = "[algo-1] " + event.log_line()
    for metric in request(tiny_dataset)["AlgorithmSpecification"]["MetricDefinitions"]:
        found = re.search(metric["Regex"], line)
        assert found and float(found.group(1)) == getattr(event, metric["Name"]), metric


def test_an_old_options_json_reads_under_the_flag_names():
    """options.json rows written when the stored names differed from the flags' still read."""
    old = {"region": "r", "max_runtime_s": 3600, "max_wait_s": 7200, "kms_key_id": "alias/k",
           "subnets": ["s-1"], "security_group_ids": ["sg-1"], "read_prefixes": ["s3://b/x/"],
           "run_role": True}  # fmt: skip
    opts = rq.JobOptions.from_dict(old)
    assert opts == rq.JobOptions(
        region="r", max_runtime=3600, max_wait=7200, kms_key="alias/k", subnet=("s-1",),
        security_group=("sg-1",), read_prefix=("s3://b/x/",), run_role=True,
    )  # fmt: skip
    flags = SageMakerOptions(max_runtime="1h", subnet=("s-1",), kms_key="alias/k")
    given = rq.JobOptions(max_runtime=3600, subnet=("s-1",), kms_key="alias/k")
    assert flags.job_options() == given
