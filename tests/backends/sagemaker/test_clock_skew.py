"""A SageMaker job's end time from AWS's clock a little before the submit time from ours
(moto's instant jobs: milliseconds; a job that failed at once, clocks seconds apart): `runs
show` and `runs list` clamp the skew, say so in the row, and carry on (issue 22 and 25)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from typer.testing import CliRunner

from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.cli import app
from finetune.runs.ledger import open_default
from tests.aws import helpers as h
from tests.aws.conftest import REGION
from tests.aws.gateway import moto_job

SMOKE = ["launch", "smoke-resnet18", "--backend", "sagemaker", "--instance", "p3.2xlarge"]


def cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(SageMakerBackend, "POLL_SECONDS", 0)


def _launch_detached(dataset):
    res = cli(*SMOKE, "--dataset", str(dataset), "--detach")
    assert res.exit_code == 0, res.output
    with open_default() as ledger:
        (run,) = ledger.list()
    return run, run.backend_ref.rsplit("/", 1)[1]


def test_motos_instant_job_is_shown_with_its_skew(cloud, fast, tiny_dataset):
    run, _ = _launch_detached(tiny_dataset)  # moto ends the job when it is created
    res = cli("runs", "show", run.id)
    assert res.exit_code == 0, res.output
    assert "completed" in res.output and "s clamped" in res.output
    listed = cli("runs", "list")
    assert listed.exit_code == 0 and run.id in listed.output, listed.output


def test_a_job_that_failed_at_once_before_our_submit_time(cloud, fast, tiny_dataset):
    run, job = _launch_detached(tiny_dataset)
    before = moto_job(job, REGION).creation_time - timedelta(seconds=4.2)
    cloud.script([h.step("Failed", "Failed", 0, FailureReason="AlgorithmError: exit 1",
                         TrainingTimeInSeconds=0, training_end_time=before)], job=job)  # fmt: skip
    res = cli("runs", "show", run.id)
    assert res.exit_code == 0, res.output
    assert "failed" in res.output and "AlgorithmError" in res.output
    assert "clock skew of 4." in res.output and "EUR 0.00" in res.output
    assert "corrupt" not in res.output
    (row,) = json.loads(cli("runs", "list", "--json").stdout)
    assert row["status"] == "failed" and row["cost_eur"] == 0 and row["wall_seconds"] == 0
    assert row["notes"] and row["notes"][0].startswith("clock skew of 4.")


@pytest.mark.parametrize(
    "reported",
    [
        {"training_end_time": "year 9999"},  # no BillableTimeInSeconds: the times say it all
        {"BillableTimeInSeconds": 10**11, "TrainingTimeInSeconds": 10**11},
    ],
    ids=["times", "billable"],
)
def test_a_job_is_never_billed_past_its_own_max_runtime(cloud, fast, tiny_dataset, reported):
    """Issue 49, item 7: a job whose end time read year 9999 was costed at 78 million EUR.
    SageMaker stops a job at its StoppingCondition's MaxRuntimeInSeconds, so it never bills
    more: a longer time reported is bounded there, and the billing line says so."""
    from datetime import datetime

    run, job = _launch_detached(tiny_dataset)
    cap = moto_job(job, REGION).stopping_condition["MaxRuntimeInSeconds"]
    step = {k: datetime(9999, 12, 31) if v == "year 9999" else v for k, v in reported.items()}
    cloud.script([h.step("Completed", "Completed", 0, **step)], job=job)
    res = cli("runs", "show", run.id)
    assert res.exit_code == 0, res.output
    assert "past the job's MaxRuntimeInSeconds: billed as" in res.output, res.output
    data = json.loads(cli("runs", "show", run.id, "--json").stdout)
    (line,) = data["money"]["lines"]
    assert line["billed_seconds"] == cap and line["usd_per_hour"] > 0
    assert data["cost_eur"] == pytest.approx(
        line["usd_per_hour"] * line["instances"] * cap / 3600 / data["money"]["usd_per_eur"]
    )
