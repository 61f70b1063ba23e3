"""Fixtures of the EC2 backend's tests: moto behind a fault layer, a fake IMDS, settings.

Every control-side test ends with the invariant check: no instance tagged by finetune is
pending, running, stopping or stopped (the ``ec2_aws`` fixture asserts it on teardown).
"""

from __future__ import annotations

import datetime

import pytest

from .fake_imds import FakeImds
from .faults import FaultServer

ACCOUNT = "123456789012"
REGION = "us-east-1"
BUCKET = "finetune-test-bucket"
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/finetune:test"
LIVE = ["pending", "running", "stopping", "stopped"]
DLAMI = "Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.10 (Ubuntu 24.04) {}"


@pytest.fixture(scope="session")
def fault_server(moto_server):
    server = FaultServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_imds():
    imds = FakeImds().start()
    yield imds
    imds.stop()


def stand_in_ami(ec2) -> str:
    """The id of an Amazon image standing in for the DLAMI: Ubuntu, x86_64, root device
    /dev/sda1, as the DLAMI (not named "Deep Learning...": tests look for the product's own
    search by that name). Seeded, as the moto server loads none of its stock images
    (tests/conftest.moto_server), then found through the API by its name."""
    name = "ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-20170721"
    seed_dlami(name, "2017-07-21T00:00:00")
    found = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "name", "Values": [name]}])
    return found["Images"][0]["ImageId"]


def put_public_ssm_parameter(name: str, value: str) -> None:
    """AWS's /aws/service/... parameters cannot be written through the API (moto refuses
    too), so the test writes the public AMI parameter into moto's in-process backend."""
    from moto.ssm.models import Parameter, ssm_backends

    params = ssm_backends[ACCOUNT][REGION]._parameters
    params[name].append(
        Parameter(
            account_id=ACCOUNT,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.datetime.now(datetime.UTC),
            version=1,
            data_type="aws:ec2:image",
        )
    )


def seed_dlami(name: str, created: str) -> str:
    """An Amazon-owned AMI called ``name`` in moto's in-process EC2 backend (as AWS publishes
    its DLAMIs; RegisterImage would make it ours): x86_64, HVM, EBS root /dev/sda1."""
    from datetime import datetime

    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami
    from moto.ec2.utils import random_ami_id

    backend = ec2_backends[ACCOUNT][REGION]
    ami = Ami(
        backend,
        random_ami_id(),
        name=name,
        owner_id="898082745236",  # an account AWS publishes DLAMIs from
        owner_alias="amazon",
        public=True,
        architecture="x86_64",
        virtualization_type="hvm",
        creation_date=datetime.fromisoformat(created),
        root_device_type="ebs",
        root_device_name="/dev/sda1",
    )
    backend.amis[ami.id] = ami
    return ami.id


def add_aws_managed_policy(name: str) -> None:
    """moto loads AWS's managed policies only on request (slowly, all of them): add the one
    the instance role attaches (Session Manager's) to moto's in-process IAM backend."""
    from moto.iam.models import AWSManagedPolicy, iam_backends

    backend = iam_backends[ACCOUNT]["aws"]
    now = datetime.datetime.now(datetime.UTC).isoformat()
    data = {
        "DefaultVersionId": "v1",
        "Path": "/",
        "Document": {"Version": "2012-10-17", "Statement": []},
        "CreateDate": now,
        "UpdateDate": now,
    }
    policy = AWSManagedPolicy.from_data(name, ACCOUNT, "us-east-1", data)
    backend.managed_policies[policy.arn] = policy


def live_instances(ec2, tag_key: str = "project", tag_value: str = "finetune") -> list[str]:
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": f"tag:{tag_key}", "Values": [tag_value]},
            {"Name": "instance-state-name", "Values": LIVE},
        ]
    )
    return [i["InstanceId"] for page in pages for r in page["Reservations"] for i in r["Instances"]]


@pytest.fixture
def ec2_aws(aws, fault_server, monkeypatch):
    """moto (reset) behind the fault layer, a bucket, the DLAMI parameter, finetune settings."""
    import boto3

    from finetune.aws import retries
    from finetune.backends.ec2.setup import infra as ec2_infra
    from finetune.backends.ec2.setup import profile as ec2_profile

    layer = fault_server.layer
    layer.requests.clear()
    layer.http.clear()
    layer.faults.clear()
    layer.quotas.clear()
    monkeypatch.setenv("AWS_ENDPOINT_URL", fault_server.url)
    monkeypatch.setenv("FINETUNE_BUCKET", BUCKET)
    monkeypatch.setenv("FINETUNE_REGION", REGION)
    monkeypatch.setenv("FINETUNE_EC2_IMAGE", IMAGE)
    sleeps: list[float] = []
    monkeypatch.setattr(retries, "sleep", sleeps.append)  # count backoff instead of waiting
    layer.sleeps = sleeps
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
    ecr = boto3.client("ecr", region_name=REGION)  # the image launches pin by digest
    ecr.create_repository(repositoryName="finetune")
    manifest = (
        '{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"}'
    )
    ecr.put_image(repositoryName="finetune", imageManifest=manifest, imageTag="test")
    ec2 = boto3.client("ec2", region_name=REGION)
    ami = stand_in_ami(ec2)
    for param in ec2_infra.AMI_PARAMETERS.values():
        put_public_ssm_parameter(param, ami)
    add_aws_managed_policy(ec2_profile.SSM_CORE_POLICY.rsplit("/", 1)[1])
    yield layer
    assert live_instances(ec2) == [], "an instance tagged by finetune was left running"


@pytest.fixture(autouse=True)
def _close_ledgers():
    """Ledgers the helpers opened are closed after each test (no SQLite lock outlives it)."""
    from .control import OPEN_LEDGERS

    yield
    while OPEN_LEDGERS:
        OPEN_LEDGERS.pop().close()
