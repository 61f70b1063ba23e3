"""Issue 23, finding 13: `finetune cleanup` removes the execution roles of SageMaker runs
whose jobs ended, even when nobody looked at the run again (that is when a role used to be
deleted); a role whose job still runs, or whose run is live in the ledger, stays."""

from __future__ import annotations

from dataclasses import replace

import boto3
import pytest
from typer.testing import CliRunner

from finetune import settings
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker import runrole
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.cli import app
from finetune.runs.ledger import open_default
from tests.aws import helpers as h
from tests.aws.conftest import REGION
from tests.aws.gateway import ACCOUNT, apply_step, moto_job

NO_JOB = "ft-20261124-090000-0000"


@pytest.fixture
def own_roles(cloud, monkeypatch):
    """The settings `finetune infra deploy` prints: no FINETUNE_ROLE_ARN."""
    monkeypatch.delenv("FINETUNE_ROLE_ARN")
    settings.get.cache_clear()
    return cloud


def _roles() -> set[str]:
    iam = boto3.client("iam")
    return {r["RoleName"] for r in iam.list_roles(PathPrefix=runrole.ROLE_PATH)["Roles"]}


def test_cleanup_removes_roles_of_ended_jobs_and_keeps_live_ones(own_roles, tiny_dataset, tmp_path):
    plan = h.sm_plan(tiny_dataset)
    ended = h.new_run(tmp_path, plan)
    SageMakerBackend().submit(plan, ended)  # moto: the job is Completed at once
    with open_default() as ledger:  # launched from this machine: its ledger knows the run
        ledger.create(replace(ended, status="completed"))
    # a second run's job, as its submission sent it, still in progress (resumed once: -r1)
    (sent,) = own_roles.requests("CreateTrainingJob")
    running = "ft-20261124-100000-1111"
    job = {**sent.json, "TrainingJobName": rq.job_name(running, 1)}
    job["RoleArn"] = sent.json["RoleArn"].replace(ended.id, running)
    boto3.client("sagemaker", region_name=REGION).create_training_job(**job)
    apply_step(moto_job(job["TrainingJobName"], REGION), {"TrainingJobStatus": "InProgress"})
    # and a role whose job was never created (the launch died between the two)
    doc = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*"}],
    }
    for run_id in (running, NO_JOB):
        runrole.ensure(boto3.client("iam"), run_id, ACCOUNT, doc, "arn:aws:iam::aws:policy/x")
    names = {r: runrole.role_name(r) for r in (ended.id, running, NO_JOB)}
    assert _roles() == set(names.values())

    be = SageMakerBackend()
    listed = be.orphans(set(), 0)
    found = {o.run_id: o for o in listed if o.kind == "execution-role"}
    assert set(found) == {ended.id, NO_JOB}
    assert found[ended.id].kind == "execution-role" and "Completed" in found[ended.id].detail
    assert found[NO_JOB].detail == "no job"
    # the running job is listed too: its run is not live in the (empty) set given
    assert [(o.kind, o.run_id) for o in listed if o.kind != "execution-role"] == [
        ("training-job", running)
    ]
    roles = {o.run_id for o in be.orphans({ended.id, running}, 0)}
    assert roles == {NO_JOB}  # live here: kept
    assert be.orphans(set(), 3600) == []  # younger than the limit: kept

    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes"])
    assert res.exit_code == 0, res.output
    assert f"deleted execution role {names[ended.id]}" in res.output
    # a run outside this machine's ledger is not this caller's to end (issue 23, finding 11):
    # listed as skipped, with why, until --all-owners says everyone's
    assert _roles() == {names[running], names[NO_JOB]}
    assert "Skipped 2 resource(s)" in res.output and names[NO_JOB] in res.output
    assert own_roles.requests("StopTrainingJob") == []  # another machine's live run?
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes", "--all-owners"])
    assert res.exit_code == 0, res.output
    assert f"deleted execution role {names[NO_JOB]}" in res.output
    assert f"stopped training job {job['TrainingJobName']}" in res.output  # everyone's
    assert _roles() == {names[running]}  # its job still ran when cleanup looked
