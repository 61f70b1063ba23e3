"""Runs execute an image by digest (issue 16, defect 4): a tag in the caller's ECR is resolved
once at launch; AWS's own images and references already by digest are used as given."""

from __future__ import annotations

import boto3
import pytest

from finetune.aws import imageref

ACCOUNT, REGION = "123456789012", "us-east-1"
REPO = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/finetune"
MANIFEST = (
    '{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"}'
)


@pytest.fixture
def ecr(aws):
    client = boto3.client("ecr", region_name=REGION)
    client.create_repository(repositoryName="finetune", imageTagMutability="IMMUTABLE")
    client.put_image(repositoryName="finetune", imageManifest=MANIFEST, imageTag="0.4.0")
    return client


def test_a_tag_becomes_its_digest(ecr):
    digest = ecr.describe_images(repositoryName="finetune")["imageDetails"][0]["imageDigest"]
    assert imageref.pin(ecr, f"{REPO}:0.4.0", ACCOUNT, REGION) == f"{REPO}@{digest}"
    assert imageref.is_pinned(f"{REPO}@{digest}")


def test_a_missing_tag_is_named(ecr):
    with pytest.raises(imageref.ImageMissing):
        imageref.pin(ecr, f"{REPO}:nope", ACCOUNT, REGION)


@pytest.mark.parametrize(
    "uri",
    [
        f"{REPO}@sha256:" + "a" * 64,  # already pinned
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311",
        f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/finetune:0.4.0",  # another region
        "docker.io/library/python:3.11",
    ],
)
def test_what_cannot_or_need_not_be_resolved_is_left_alone(uri):
    class NoCalls:
        def describe_images(self, **kw):
            raise AssertionError("no ECR call expected")

    assert imageref.pin(NoCalls(), uri, ACCOUNT, REGION) == uri


def test_the_stack_makes_tags_immutable():
    import yaml

    from finetune.aws import infra

    repo = yaml.safe_load(infra.template_text())["Resources"]["Repository"]["Properties"]
    assert repo["ImageTagMutability"] == "IMMUTABLE"
