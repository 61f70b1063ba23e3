"""What a launch checks before anything exists, through the library and the real CLI: the
backend's name and options, its declared capabilities, the devices it would use, and that a
listing of the ledger needs no cloud."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from finetune import service
from finetune.backends.base import Capabilities, Feature, ResourceRequest
from finetune.cli import app
from finetune.errors import UsageError
from finetune.runs.ledger import open_default

SMOKE = ["launch", "smoke-resnet18"]


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def gpus_here(tmp_path, monkeypatch):
    """This machine with one NVIDIA GPU, as `nvidia-smi -L` reports it (a fake at the edge)."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{__import__('os').environ['PATH']}")


def test_declared_capabilities_are_what_a_launch_checks(tiny_dataset):
    request = service.LaunchRequest(
        recipe="smoke-resnet18",
        dataset=str(tiny_dataset),
        resources=ResourceRequest(spot=True, count=2),
    )
    with pytest.raises(UsageError) as err:
        service.plan_launch(request)
    text = str(err.value)
    assert "spot capacity: it runs on this machine" in text and "several hosts" in text
    assert "To fix:" in text
    caps = Capabilities(missing={Feature.STOP: "it cannot stop a run"})
    caps.check("x", {Feature.SPOT})  # not missing: nothing to say
    with pytest.raises(UsageError, match="cannot provide stopping a run: it cannot stop a run"):
        caps.check("x", {Feature.STOP, Feature.SPOT})


def test_gpus_that_are_not_here_fail_the_dry_run(tiny_dataset, gpus_here):
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--gpus", "0,1", "--dry-run")
    assert res.exit_code == 2 and "GPU 1 is not on this machine" in res.output
    assert "To fix:" in res.output
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--gpus", "0", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "local: 1 host(s) x 1 gpu" in res.output and "CUDA_VISIBLE_DEVICES=0" in res.output


def test_the_local_dry_run_says_where_and_what_it_costs(tiny_dataset):
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--cpus", "2", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "Local run:" in res.output and "none charged" in res.output
    with open_default() as ledger:
        assert ledger.list() == []


def test_an_unknown_backend_fails_the_dry_run(tiny_dataset):
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--backend", "ec", "--dry-run")
    assert res.exit_code == 2 and 'Did you mean "ec2"?' in res.output
    assert "To fix: use one of: local, sagemaker, ec2." in res.output


def test_runs_list_needs_no_cloud(tiny_dataset, tmp_path, monkeypatch):
    """A live cloud run in the ledger and no AWS to ask: the listing shows the ledger; only
    --refresh asks the cloud (and says why it could not)."""
    from finetune.aws import retries
    from finetune.plan import Resources, build_plan

    monkeypatch.setattr(retries, "sleep", lambda seconds: None)  # refused at once, no backoff
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    res = Resources(backend="sagemaker", instance_type="p3.2xlarge", device="gpu")
    plan = build_plan("smoke-resnet18", tiny_dataset, res)
    arn = "arn:aws:sagemaker:eu-west-1:123456789012:training-job/finetune-x"
    run = service.new_run(plan, "sagemaker", "ft-20260101-000000-abcd", tmp_path)
    with open_default() as ledger:
        ledger.create(run)
        ledger.update(run.id, status="running", backend_ref=arn, started_at=time.time())
    listed = cli("runs", "list")
    assert listed.exit_code == 0, listed.output
    assert run.id in listed.output and "running" in listed.output
    refreshed = cli("runs", "list", "--refresh")
    assert refreshed.exit_code != 0 and "To fix:" in refreshed.output
