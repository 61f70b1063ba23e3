"""Issue 49 (the probe's SageMaker DEFECT): a real `finetune launch` SIGKILLed right after
CreateTrainingJob made the job -- it never heard back, so its ledger row holds no job ARN.
The job's name was recorded before it was created (RUN_DIR/sagemaker/NAME-request.json and
a "creating" event), so `runs show`, `runs stop`, `launch --resume` and `cleanup` each find
the job by that name: nothing runs that a user cannot see, stop or clean."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from finetune.backends.sagemaker import request as rq
from finetune.cli import app
from finetune.runs.ledger import open_default
from tests.aws import helpers as h
from tests.aws.conftest import REGION
from tests.aws.gateway import apply_step, moto_job

SMOKE = ["launch", "smoke-resnet18", "--backend", "sagemaker", "--instance", "p3.2xlarge"]


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _killed_after_create(cloud, dataset) -> tuple[str, str]:
    """A `finetune launch --detach` process, SIGKILLed once SageMaker has made its job and
    before the reply reaches it; returns (run id, job name)."""
    cmd = [sys.executable, "-m", "finetune", *SMOKE, "--dataset", str(dataset), "--detach"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    cloud.fail("CreateTrainingJob", "InternalFailure", status=500, forward=True,
               on_match=lambda _: proc.kill())  # fmt: skip
    out = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == -signal.SIGKILL, out
    with open_default() as ledger:
        (run,) = ledger.list()
        assert run.status == "submitted" and run.backend_ref is None  # it never heard back
    name = rq.job_name(run.id)
    assert moto_job(name, REGION) is not None  # the job exists
    return run.id, name


def test_runs_show_finds_the_job_by_name_and_runs_stop_stops_it(cloud, tiny_dataset):
    run_id, name = _killed_after_create(cloud, tiny_dataset)
    cloud.script([h.step("InProgress", "Training", 60)], job=name)
    res = cli("runs", "show", run_id, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["status"] == "running"
    with open_default() as ledger:  # reconciled: the ARN is recorded now
        assert ledger.get(run_id).backend_ref.endswith(f"training-job/{name}")
    res = cli("runs", "stop", run_id)
    assert res.exit_code == 0, res.output
    assert [c.json["TrainingJobName"] for c in cloud.requests("StopTrainingJob")] == [name]
    with open_default() as ledger:  # the ledger said which job was coming, before it came
        said = [msg for _, kind, msg in ledger.events(run_id) if kind == "creating"]
    assert said == [f"CreateTrainingJob {name} in {REGION}"]


def test_runs_stop_right_after_the_kill_stops_the_job(cloud, tiny_dataset):
    """No `runs show` first: stop itself finds the job by its recorded name."""
    run_id, name = _killed_after_create(cloud, tiny_dataset)
    cloud.script([h.step("InProgress", "Training", 60)], job=name)
    res = cli("runs", "stop", run_id)
    assert res.exit_code == 0 and "no SageMaker job" not in res.output, res.output
    assert [c.json["TrainingJobName"] for c in cloud.requests("StopTrainingJob")] == [name]
    with open_default() as ledger:
        assert ledger.get(run_id).status == "stopping"


def test_resume_sees_the_running_job_then_resumes_after_its_stop(cloud, tiny_dataset):
    run_id, name = _killed_after_create(cloud, tiny_dataset)
    cloud.script([h.step("InProgress", "Training", 60)], job=name)
    res = cli("launch", "--resume", run_id, "--detach")
    assert res.exit_code == 2 and f"run {run_id} is still running" in res.output, res.output
    assert cli("runs", "stop", run_id).exit_code == 0
    cloud.script([h.step("Stopped", "Stopped", 90, BillableTimeInSeconds=90)], job=name)
    res = cli("launch", "--resume", run_id, "--detach")
    assert res.exit_code == 0, res.output
    first, second = (c.json for c in cloud.requests("CreateTrainingJob"))
    assert (first["TrainingJobName"], second["TrainingJobName"]) == (name, f"{name}-r1")
    assert second["CheckpointConfig"] == first["CheckpointConfig"]  # from its checkpoints


def test_cleanup_stops_the_job_of_an_abandoned_launch(cloud, tiny_dataset):
    run_id, name = _killed_after_create(cloud, tiny_dataset)
    apply_step(moto_job(name, REGION), {"TrainingJobStatus": "InProgress"})  # it trains
    res = cli("cleanup", "--yes")
    assert "Nothing to clean up" in res.output  # the launch may still be on its way: wait
    assert cloud.requests("StopTrainingJob") == []
    with open_default() as ledger:  # an hour later, nobody has heard of it
        ledger.update(run_id, created_at=time.time() - 3600)
    res = cli("cleanup", "--yes")
    assert res.exit_code == 0, res.output
    assert f"stopped training job {name}" in res.output and "abandoned launch" in res.output
    assert [c.json["TrainingJobName"] for c in cloud.requests("StopTrainingJob")] == [name]
    with open_default() as ledger:
        assert ledger.get(run_id).status == "failed"
