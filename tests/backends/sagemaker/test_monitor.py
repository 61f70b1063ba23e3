"""Following SageMaker jobs over HTTP through documented status sequences, played by editing
moto's job objects between polls; the ledger ends with times, interruptions and euros."""

from __future__ import annotations

import pytest

from finetune import service
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.errors import UsageError
from finetune.estimate.cost import spot_savings
from finetune.runs.charges import run_money
from tests.aws import helpers as h


def _launch(cloud, dataset, tmp_path, steps, **plan_args):
    """Submit a run through the service (so it is in a ledger) and script its job."""
    plan = h.sm_plan(dataset, **plan_args)
    ledger = h.ledger_at(tmp_path)
    be = SageMakerBackend(poll_seconds=0)
    run = ledger.create(h.new_run(tmp_path, plan))
    run = service.submit(plan, be, ledger, run)
    cloud.script(steps, job=run.backend_ref.rsplit("/", 1)[1])
    return run, be, ledger


def _follow(run, be, ledger):
    seen = []
    run = service.follow(
        run, be, ledger, lambda r, s, e, t: seen.append((s.state, s.detail)), service.Follow(0)
    )
    return run, seen


def test_on_demand_sequence_ends_completed_with_cost(cloud, tiny_dataset, tmp_path):
    run, be, ledger = _launch(cloud, tiny_dataset, tmp_path, h.ON_DEMAND, instance="p3.2xlarge")
    run, seen = _follow(run, be, ledger)
    states = [s for s, _ in seen]
    assert states == ["submitted", "running", "running", "running", "completed"]
    assert seen[2][1] == "Training: Training image download completed. Training in progress."
    assert run.status == "completed" and run.exit_reason is None
    assert (run.training_seconds, run.billable_seconds, run.interrupted_seconds) == (620, 620, 0)
    assert run.region == "eu-west-1" and run.hosts == 1
    # 620 s x 1 x ml.p3.2xlarge eu-west-1 with no sourced ml.* price: the estimate EC2 3.305
    # USD/h (catalog snapshot) x 1.25 (default markup) = 4.13125 USD/h, at the ECB history's
    # latest rate 1.1172 USD/EUR (2026-10-30)
    (charge,) = run.charges
    assert charge["instance_type"] == "ml.p3.2xlarge" and "estimate: EC2" in charge["price_source"]
    assert (charge["seconds"], charge["instances"]) == (620, 1)
    assert charge["usd_per_hour"] == pytest.approx(4.13125)
    m = run_money(run)
    assert m.eur == pytest.approx(620 * 4.13125 / 3600 / 1.1172)
    assert spot_savings(m) is None


def test_spot_interrupted_once_counts_lost_time(cloud, tiny_dataset, tmp_path):
    steps = h.SPOT_INTERRUPTED_ONCE
    run, be, ledger = _launch(
        cloud, tiny_dataset, tmp_path, steps, instance="p3.2xlarge", spot=True
    )
    run, seen = _follow(run, be, ledger)
    assert ("running", "Interrupted: Spot instances were interrupted") in seen
    assert run.status == "completed"
    assert run.interrupted_seconds == 200  # Interrupted at 300 s, training again at 500 s
    assert (run.training_seconds, run.billable_seconds) == (920, 320)
    m = run_money(run)  # managed spot: the on-demand price for the billable seconds
    assert spot_savings(m) == pytest.approx(1 - 320 / 920)
    assert m.eur == pytest.approx(320 * 4.13125 / 3600 / 1.1172)


def test_max_wait_exceeded_is_interrupted_and_resumable(cloud, tiny_dataset, tmp_path):
    run, be, ledger = _launch(cloud, tiny_dataset, tmp_path, h.SPOT_MAX_WAIT, spot=True)
    run, _ = _follow(run, be, ledger)
    assert run.status == "interrupted"
    assert "--max-wait" in run.exit_reason and f"--resume {run.id}" in run.exit_reason
    assert run.interrupted_seconds == 7200 - 300
    assert run.billable_seconds == 210


def test_failed_job_keeps_the_failure_reason(cloud, tiny_dataset, tmp_path):
    run, be, ledger = _launch(cloud, tiny_dataset, tmp_path, h.FAILED)
    run, _ = _follow(run, be, ledger)
    assert run.status == "failed"
    assert run.exit_reason.startswith("AlgorithmError: ExecuteUserScriptError: CUDA out of memory")
    assert f"finetune runs logs {run.id}" in run.exit_reason


def test_capacity_failure_says_what_to_try(cloud, tiny_dataset, tmp_path):
    run, be, ledger = _launch(cloud, tiny_dataset, tmp_path, h.CAPACITY)
    run, seen = _follow(run, be, ledger)
    assert seen[0] == (
        "submitted",
        "Starting: Insufficient capacity error from EC2 while launching",
    )
    assert run.status == "failed" and "CapacityError" in run.exit_reason
    assert "To fix:" in run.exit_reason and "--region" in run.exit_reason


def test_stop_sends_stop_training_job_and_ends_stopped(cloud, tiny_dataset, tmp_path):
    steps = [h.step("InProgress", "Starting", 0), h.step("InProgress", "Training", 60)]
    run, be, ledger = _launch(cloud, tiny_dataset, tmp_path, steps)
    run, status, _ = service.sync(run, be, ledger)
    assert status.state == "submitted"
    be.stop(run)  # describes (-> Training), then StopTrainingJob
    (stop,) = cloud.requests("StopTrainingJob")
    assert stop.json == {"TrainingJobName": run.backend_ref.rsplit("/", 1)[1]}
    run, status, _ = service.sync(run, be, ledger)
    assert status.state == "stopping"
    cloud.script(
        [h.step("Stopped", "Stopped", 200, BillableTimeInSeconds=200)],
        job=stop.json["TrainingJobName"],
    )
    run, status, _ = service.sync(run, be, ledger)
    assert run.status == "stopped" and f"--resume {run.id}" in run.exit_reason
    with pytest.raises(UsageError, match="is not running"):
        be.stop(run)


def test_final_metrics_are_recorded_once(cloud, tiny_dataset, tmp_path):
    steps = [*h.ON_DEMAND]
    steps[-1] = {
        **steps[-1],
        "FinalMetricDataList": [{"MetricName": "val_acc", "Value": 0.75, "Timestamp": 0}],
    }
    run, be, ledger = _launch(cloud, tiny_dataset, tmp_path, steps)
    run, _ = _follow(run, be, ledger)
    finals = [m for _, kind, m in ledger.events(run.id) if kind == "final"]
    assert finals == ['{"final_metrics": {"val_acc": 0.75}}']


def test_throttled_describe_is_retried_while_following(cloud, tiny_dataset, tmp_path):
    run, be, ledger = _launch(cloud, tiny_dataset, tmp_path, h.ON_DEMAND)
    cloud.fail("DescribeTrainingJob", "ThrottlingException", "Rate exceeded", times=3)
    run, _ = _follow(run, be, ledger)
    assert run.status == "completed" and len(cloud.delays) == 3
