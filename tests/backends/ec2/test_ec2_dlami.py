"""The torch engine on EC2 against moto: the PyTorch Deep Learning AMI found by its public SSM
parameter (seeded into moto's backend: moto refuses put_parameter under /aws/) or by name,
the wheel in the run's prefix, the RunInstances request as sent, and MXNet on Hopper refused
before any AWS call."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

import boto3
import pytest

from finetune import service
from finetune.backends.ec2.backend import Ec2Backend
from finetune.backends.ec2.options import Ec2Options
from finetune.backends.ec2.setup import ami as ec2_ami
from finetune.errors import ConfigError, UsageError
from finetune.plan import Resources, build_plan
from finetune.runs.ledger import Ledger
from tests.backends.ec2.conftest import (
    BUCKET,
    DLAMI,
    REGION,
    put_public_ssm_parameter,
)
from tests.backends.ec2.conftest import seed_dlami as _seed_dlami
from tests.backends.ec2.control import OPEN_LEDGERS


def _clients():
    return boto3.client("ssm", region_name=REGION), boto3.client("ec2", region_name=REGION)


def test_dlami_from_its_public_ssm_parameter(ec2_aws):
    ami = _seed_dlami(DLAMI.format("20261009"), "2026-10-09T00:00:00")
    parameter = ec2_ami.framework_parameter("torch", "x86_64")
    assert parameter == (
        "/aws/service/deeplearning/ami/x86_64/"
        "oss-nvidia-driver-gpu-pytorch-2.10-ubuntu-24.04/latest/ami-id"
    )
    put_public_ssm_parameter(parameter, ami)
    choice = ec2_ami.resolve(*_clients(), "x86_64", "torch", None)
    assert (choice.ami_id, choice.root_device) == (ami, "/dev/sda1")
    assert choice.source == f"SSM {parameter}" and choice.name == DLAMI.format("20261009")
    assert choice.python == "/opt/pytorch/bin/python"
    assert ec2_aws.sent("DescribeImages")  # the id was checked in this region


def test_dlami_by_name_when_the_parameter_cannot_be_read(ec2_aws):
    _seed_dlami(DLAMI.format("20260801"), "2026-08-01T00:00:00")
    newest = _seed_dlami(DLAMI.format("20261009"), "2026-10-09T00:00:00")
    choice = ec2_ami.resolve(*_clients(), "x86_64", "torch", None)
    assert choice.ami_id == newest and choice.source.startswith("name ")
    assert "PyTorch 2.10 (Ubuntu 24.04) *" in choice.source
    [by_name] = [
        r
        for r in ec2_aws.sent("DescribeImages")
        if "Deep Learning" in r.get("Filter.1.Value.1", "")
    ]
    assert by_name["Owner.1"] == "amazon" and by_name["Filter.1.Name"] == "name"


def test_no_dlami_at_all_says_pass_ami(ec2_aws):
    with pytest.raises(ConfigError) as err:
        ec2_ami.resolve(*_clients(), "x86_64", "torch", None)
    assert "no PyTorch Deep Learning AMI" in str(err.value) and "--ami" in str(err.value)


def _launch(tmp_path, dataset, recipe: str, instance: str):
    from finetune.catalog import instances

    res = Resources(
        backend="ec2",
        instance_type=instance,
        devices_per_host=instances.get(instance).gpu_count,
        device="gpu",
        spot=True,
    )
    plan = build_plan(recipe, dataset, res)
    ledger = Ledger(tmp_path / "ledger.sqlite")
    OPEN_LEDGERS.append(ledger)
    backend = Ec2Backend(Ec2Options(max_runtime=3600))
    return service.launch(plan, backend, ledger), backend, ledger


def test_torch_run_on_the_dlami_as_sent(ec2_aws, tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.delenv("FINETUNE_EC2_IMAGE")  # the torch engine needs no image of ours
    ami = _seed_dlami(DLAMI.format("20261009"), "2026-10-09T00:00:00")
    put_public_ssm_parameter(ec2_ami.framework_parameter("torch", "x86_64"), ami)
    run, backend, ledger = _launch(tmp_path, tiny_dataset, "smoke-resnet18-torch", "g6e.xlarge")
    [sent] = ec2_aws.sent("RunInstances")
    assert sent["ImageId"] == ami and sent["InstanceType"] == "g6e.xlarge"
    assert sent["BlockDeviceMapping.1.DeviceName"] == "/dev/sda1"
    script = base64.b64decode(sent["UserData"]).decode()
    wheel = f"s3://{BUCKET}/finetune/runs/{run.id}/code/finetune-0.1.0-py3-none-any.whl"
    assert f"WHEEL_URI={wheel}" in script and "PYTHON=/opt/pytorch/bin/python" in script
    assert "docker pull" not in script and "docker run" not in script
    assert "-m finetune.backends.ec2.agent" in script and "--constraint" in script
    assert "METRICS_LOCK=''\n" in script  # no metric loggers named: none installed
    key = wheel.split("/", 3)[3]
    s3 = boto3.client("s3", region_name=REGION)
    data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert "finetune/backends/ec2/agent/__main__.py" in zf.namelist()
        assert "finetune/backends/ec2/boot-requirements.txt" in zf.namelist()
    # the digests the boot checks are those of what the launch uploaded
    assert f"WHEEL_SHA256={hashlib.sha256(data).hexdigest()}\n" in script
    plan_json = s3.get_object(Bucket=BUCKET, Key=f"finetune/runs/{run.id}/plan.json")["Body"]
    assert f"PLAN_SHA256={hashlib.sha256(plan_json.read()).hexdigest()}\n" in script
    policy = boto3.client("iam").get_role_policy(
        RoleName=sent["IamInstanceProfile.Name"], PolicyName="run-access"
    )["PolicyDocument"]
    assert "PullImage" not in {s["Sid"] for s in policy["Statement"]}  # nothing to pull
    [(_, _, message)] = [e for e in ledger.events(run.id) if e[1] == "image"]
    assert ami in message and "SSM /aws/service/deeplearning" in message
    runtime = ledger.get(run.id).plan["runtime"]  # the plan records the AMI it ran on
    assert runtime["ami"] == ami and runtime["engine"] == "torch"
    assert runtime["ami_source"].startswith("SSM /aws/service/deeplearning/ami/x86_64/")
    backend.stop(ledger.get(run.id))


@pytest.mark.parametrize("instance", ["p5.48xlarge", "p6-b200.48xlarge"])
def test_mxnet_on_hopper_or_blackwell_is_refused_before_any_aws_call(
    ec2_aws, tiny_dataset, tmp_path, instance
):
    before = len(ec2_aws.requests)  # the fixture's own set-up calls
    with pytest.raises(UsageError) as err:
        _launch(tmp_path, tiny_dataset, "smoke-resnet18", instance)
    assert "engine=torch" in str(err.value) and "To fix:" in str(err.value)
    assert ec2_aws.requests[before:] == []  # no RunInstances, upload or lookup: nothing
