"""One secret screen (backends/secretscan.py) for every cloud backend, run before anything is
uploaded or sent: the token shapes it knows, what it must not flag (digests, paths, names),
messages that name the field and never the value, and the EC2 and SageMaker paths."""

from __future__ import annotations

import boto3
import pytest

from finetune.backends import secretscan
from finetune.backends.sagemaker import validate

# Shapes of real credentials, made up (AWS's documented example secret key among them).
SECRETS = {
    "an AWS access key id": ["AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A"],
    "an AWS secret access key": ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
    "a Hugging Face token": ["hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"],
    "an API key (sk-...)": [
        "sk-proj-4fGh7Jk9Lm2Np5Qr8St1Uv3Wx6Yz",
        "sk-ant-api03-abcdEFGH1234ijklMNOP",
    ],
    "a GitHub token": ["ghp_1234567890abcdefghijABCDEFGHIJ123456", "github_pat_" + "A1b2" * 15],
    "a Slack token": ["xoxb-123456789012-123456789012-AbCdEfGhIjKl"],
    "a private key": ["-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r..."],
}
NOT_SECRETS = [
    "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",  # a SHA-1 digest (hex only)
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # SHA-256
    "s3://finetune-test-bucket/finetune/datasets/shapes-ec0c329c5a10/",
    "/home/alice/data/caltech256/Caltech256Prepared/train/x1/abc.rec",
    "ResNetOneHundredFiftyTwoImageNetElevenKay",  # 40 letters: a word, not base64 noise
    "resnet152_v1",
    "sk-learn",
    "imagenet11k-resnet-152",
    "0.001",
]


@pytest.mark.parametrize(
    ("kind", "value"), [(k, v) for k, values in SECRETS.items() for v in values]
)
def test_known_token_shapes_are_found(kind, value):
    assert secretscan.value_kind(value) == kind
    embedded = secretscan.value_kind(f"prefix {value} suffix")  # a bare 40-char key needs a label
    assert embedded == (None if kind == "an AWS secret access key" else kind)


@pytest.mark.parametrize("value", NOT_SECRETS)
def test_digests_paths_and_names_are_not_secrets(value):
    assert secretscan.value_kind(value) is None


def test_a_secret_key_inside_text_counts_after_a_label():
    key = SECRETS["an AWS secret access key"][0]
    assert secretscan.value_kind(f"aws_secret_access_key={key} region=x") is not None
    assert secretscan.value_kind(f"weights {key[:-1]}Z.params") is None  # inside a name


def test_messages_name_the_field_and_never_the_value():
    token = SECRETS["a Hugging Face token"][0]
    found = secretscan.scan_map("environment variable", {"HUB": token, "DB_PASSWORD": "x"})
    assert [f.where for f in found] == [
        "environment variable HUB",
        "environment variable DB_PASSWORD",
    ]
    with pytest.raises(secretscan.SecretFound) as err:
        secretscan.refuse(found, "DescribeTrainingJob")
    text = str(err.value)
    assert token not in text and "HUB" in text and "\nTo fix: remove it" in text
    assert err.value.exit_code == 2


def test_sagemaker_preflight_uses_the_screen():
    req = {"HyperParameters": {"note": SECRETS["an AWS secret access key"][0]}, "Environment": {}}
    problems = validate.check_request(req, "eu-west-1")
    assert any(
        "hyperparameter note looks like an AWS secret access key" in p.what for p in problems
    )


def test_ec2_refuses_a_plan_with_a_secret_before_sending_anything(
    aws, tiny_dataset, tmp_path, monkeypatch
):
    """The recipe's description is a free text that lands in plan.json in S3."""
    from finetune import service
    from finetune.backends.ec2.backend import Ec2Backend
    from finetune.plan import Resources, build_plan
    from finetune.runs.ledger import Ledger

    monkeypatch.setenv("FINETUNE_BUCKET", "finetune-test-bucket")
    monkeypatch.setenv("FINETUNE_EC2_IMAGE", "123456789012.dkr.ecr.us-east-1.amazonaws.com/f:t")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="finetune-test-bucket")
    token = SECRETS["a GitHub token"][0]
    resources = Resources(backend="ec2", instance_type="g5.xlarge", device="gpu")
    plan = build_plan("smoke-resnet18", tiny_dataset, resources, [f"description=use {token}"])
    refused = pytest.raises(secretscan.SecretFound, match=r"plan\.json at recipe\.description")
    with Ledger(tmp_path / "ledger.sqlite") as ledger, refused as err:
        service.launch(plan, Ec2Backend(), ledger)
    assert token not in str(err.value)
    assert s3.list_objects_v2(Bucket="finetune-test-bucket").get("KeyCount") == 0


def test_an_honest_plan_passes_the_screen(tiny_dataset):
    import json

    from finetune.plan import Resources, build_plan

    resources = Resources(backend="ec2", instance_type="g5.xlarge", device="gpu")
    plan = build_plan("smoke-resnet18", tiny_dataset, resources, [])
    assert secretscan.scan_document("plan.json", json.loads(plan.to_json())) == []
    assert secretscan.scan_map("hyperparameter", plan.hyperparameters.to_strings()) == []
