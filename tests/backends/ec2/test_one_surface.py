"""The two AWS backends take the same flags and settings: --region on both, the training
image as a setting (`config set image`), every missing setting named at once with the same
exit code."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from finetune.cli import app

from .conftest import IMAGE, REGION


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _dry_run(dataset, backend: str, *more: str):
    args = ["launch", "smoke-resnet18", "--dataset", str(dataset), "--backend", backend]
    return cli(*args, "--instance", "g5.xlarge", *more, "--dry-run")


def test_region_is_a_flag_of_the_ec2_backend_too(ec2_aws, tiny_dataset, monkeypatch):
    monkeypatch.delenv("FINETUNE_REGION")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    res = _dry_run(tiny_dataset, "ec2", "--region", REGION)
    assert res.exit_code == 0, res.output
    assert f"region       {REGION}" in res.output
    # a wrong one: refused by both backends alike
    ec2 = _dry_run(tiny_dataset, "ec2", "--region", "eu-west-9")
    sagemaker = _dry_run(tiny_dataset, "sagemaker", "--region", "eu-west-9")
    assert ec2.exit_code == sagemaker.exit_code == 4, (ec2.output, sagemaker.output)
    assert "is not a known AWS region" in ec2.output and "To fix:" in ec2.output


def test_the_image_is_a_setting(ec2_aws, tiny_dataset, monkeypatch):
    monkeypatch.delenv("FINETUNE_EC2_IMAGE")
    res = _dry_run(tiny_dataset, "ec2")
    assert res.exit_code == 2 and "none is configured" in res.output
    assert "`finetune config set image URI`" in " ".join(res.output.split())
    assert cli("config", "set", "image", IMAGE).exit_code == 0
    res = _dry_run(tiny_dataset, "ec2")
    assert res.exit_code == 0, res.output
    assert f"image        {IMAGE}" in res.output


@pytest.mark.parametrize("backend", ["ec2", "sagemaker"])
def test_every_missing_setting_at_once_with_one_exit_code(ec2_aws, tiny_dataset, monkeypatch,
                                                          backend):  # fmt: skip
    for var in ("FINETUNE_REGION", "FINETUNE_BUCKET", "FINETUNE_EC2_IMAGE"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    res = _dry_run(tiny_dataset, backend)
    assert res.exit_code == 2, res.output
    assert "Pre-flight checks failed:" in res.output
    assert "no AWS region is set" in res.output and "no S3 bucket is set" in res.output
    # with a region, the plan is priced and shown, then what is still missing
    res = _dry_run(tiny_dataset, backend, "--region", REGION)
    assert res.exit_code == 2, res.output
    assert res.output.index("Plan:") < res.output.index("no S3 bucket is set")
