"""One ECR image-address pattern (finetune.aws.imageref.ECR_URI) for every backend: SageMaker
takes an image only with a tag or a digest; the EC2 agent's `docker pull` also takes one
without (as :latest), so its pull statement must cover it. Pure functions, no AWS."""

from __future__ import annotations

import pytest

from finetune.aws import imageref
from finetune.backends.ec2.request import instance_policy
from finetune.backends.sagemaker import runrole, validate

ACCOUNT = "123456789012"
REPO = f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/finetune"
DIGEST = "sha256:" + "a" * 64
ARN = f"arn:aws:ecr:eu-west-1:{ACCOUNT}:repository/finetune"

VERSIONED = [  # (image, repository ARN): accepted by every backend
    (f"{REPO}:0.4.0", ARN),
    (f"{REPO}@{DIGEST}", ARN),
    (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311",
        "arn:aws:ecr:us-east-1:763104351884:repository/pytorch-training",
    ),
    (
        f"{ACCOUNT}.dkr.ecr.cn-north-1.amazonaws.com.cn/team/finetune:t1",
        f"arn:aws-cn:ecr:cn-north-1:{ACCOUNT}:repository/team/finetune",
    ),
]
NO_ECR_IMAGE = [  # refused by every backend
    "",
    "finetune:latest",  # Docker Hub
    "ghcr.io/org/finetune:1",
    f"{REPO}:bad/tag",
    f"{REPO}@sha256:abc",  # not a whole digest
    f"{REPO}:",
    f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/Finetune:1",  # ECR names are lower case
    "12345.dkr.ecr.eu-west-1.amazonaws.com/finetune:1",
    f"{REPO}:1 ",
]


@pytest.mark.parametrize(("image", "arn"), VERSIONED)
def test_a_tag_or_digest_is_an_image_everywhere(image, arn):
    ref = imageref.parse(image)
    assert ref is not None and ref.repository_arn == arn
    assert (ref.tag is None) is (ref.digest is not None)
    assert imageref.parse(image, untagged=True) == ref
    assert _ec2_pull(image) == [arn]
    assert _sagemaker_pull(image) == [arn]
    assert "not an ECR image" not in _sagemaker_problems(image)


def test_without_tag_or_digest_only_docker_pull_takes_it():
    assert imageref.parse(REPO) is None
    ref = imageref.parse(REPO, untagged=True)
    assert ref is not None and (ref.tag, ref.digest) == (None, None)
    assert _ec2_pull(REPO) == [ARN]  # the agent pulls finetune:latest
    assert _sagemaker_pull(REPO) is None
    assert "not an ECR image URI with a tag or digest" in _sagemaker_problems(REPO)


@pytest.mark.parametrize("image", NO_ECR_IMAGE)
def test_anything_else_is_no_ecr_image(image):
    assert imageref.parse(image) is None
    assert imageref.parse(image, untagged=True) is None
    assert _ec2_pull(image) is None
    assert _sagemaker_pull(image) is None
    assert "not an ECR image" in _sagemaker_problems(image)


def test_a_tag_is_pinned_only_with_one():
    assert imageref.pin(None, REPO, ACCOUNT, "eu-west-1") == REPO  # nothing to resolve


def _ec2_pull(image: str) -> list[str] | None:
    policy = instance_policy("bucket", "finetune/runs/R/", "finetune/datasets/D/", image)
    return _pull(policy)


def _sagemaker_pull(image: str) -> list[str] | None:
    policy = runrole.policy("R", "bucket", ["finetune/datasets/D/"], image, "eu-west-1", ACCOUNT)
    return _pull(policy)


def _pull(policy: dict) -> list[str] | None:
    pulls = [s["Resource"] for s in policy["Statement"] if s["Sid"] == "PullImage"]
    return pulls[0] if pulls else None


def _sagemaker_problems(image: str) -> str:
    problems = validate.check_request({"AlgorithmSpecification": {"TrainingImage": image}}, None)
    return " | ".join(p.what for p in problems)
