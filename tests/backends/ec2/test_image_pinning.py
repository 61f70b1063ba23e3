"""EC2 runs pull their image by digest (issue 16, defect 4): the tag is resolved at launch,
recorded in the run's plan.json, and a spot relaunch pulls the same digest even after the
tag was pushed again."""

from __future__ import annotations

import base64
import json
import re

import boto3
from typer.testing import CliRunner

from finetune.backends.ec2.agent import protocol as p
from finetune.cli import app

from .conftest import BUCKET, REGION
from .control import agent_says

OTHER = json.dumps(  # another build pushed under the same tag
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"digest": "sha256:" + "b" * 64},
    }
)


def _images(layer) -> list[str]:
    out = []
    for req in layer.sent("RunInstances"):
        script = base64.b64decode(req["UserData"]).decode()
        out.append(re.search(r"^IMAGE=(\S+)$", script, re.M)[1])
    return out


def test_every_attempt_pulls_the_digest_resolved_at_launch(ec2_aws, tiny_dataset):
    ecr = boto3.client("ecr", region_name=REGION)
    (image,) = ecr.describe_images(repositoryName="finetune")["imageDetails"]
    args = ["launch", "smoke-resnet18", "--backend", "ec2", "--instance", "g5.xlarge"]
    res = CliRunner().invoke(app, [*args, "--dataset", str(tiny_dataset), "--spot", "--detach"])
    assert res.exit_code == 0, res.output
    run_id = re.search(r"Run (ft-[\w-]+) started", res.output)[1]
    ecr.batch_delete_image(repositoryName="finetune", imageIds=[{"imageTag": "test"}])
    ecr.put_image(repositoryName="finetune", imageManifest=OTHER, imageTag="test")  # moved
    agent_says(run_id, "interrupted", 1, reason="notice", interruption="spot")
    CliRunner().invoke(app, ["runs", "show", run_id])  # relaunches
    pinned = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/finetune@{image['imageDigest']}"
    assert _images(ec2_aws) == [pinned, pinned]
    body = boto3.client("s3", region_name=REGION).get_object(
        Bucket=BUCKET, Key=p.run_prefix(run_id) + p.PLAN
    )["Body"]
    assert json.loads(body.read())["image"] == pinned
    assert CliRunner().invoke(app, ["runs", "stop", run_id]).exit_code == 0


def test_an_image_tag_that_is_not_in_ecr_stops_the_launch(ec2_aws, tiny_dataset, monkeypatch):
    monkeypatch.setenv(
        "FINETUNE_EC2_IMAGE", f"123456789012.dkr.ecr.{REGION}.amazonaws.com/finetune:nope"
    )
    args = ["launch", "smoke-resnet18", "--backend", "ec2", "--instance", "g5.xlarge"]
    res = CliRunner().invoke(app, [*args, "--dataset", str(tiny_dataset), "--detach"])
    assert res.exit_code == 4 and "is not in ECR" in res.output and "To fix:" in res.output
    assert ec2_aws.sent("RunInstances") == []
    keys = boto3.client("s3", region_name=REGION).list_objects_v2(Bucket=BUCKET).get("KeyCount")
    assert keys == 0  # resolved before anything was uploaded
