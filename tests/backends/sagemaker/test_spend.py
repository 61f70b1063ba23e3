"""Spend while a SageMaker job runs (issue 21 section 3), over moto with the job's times set by
the script: euros so far and the projected total through estimate.money, and --max-eur on a
running run: the projected total passing it stops the job (StopTrainingJob) and the ledger says
why. Figures by hand: the catalog snapshot's EC2 price x the default SageMaker markup."""

from __future__ import annotations

import pytest

from finetune import service
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.contracts.metrics import EpochMetrics
from finetune.runs.spend import spend
from finetune.service.sync import guard_budget
from tests.aws import helpers as h
from tests.ranking.planhand import LATEST_RATE, SAGEMAKER_MARKUP, on_demand

USD_PER_HOUR = on_demand("p3.2xlarge", "eu-west-1") * SAGEMAKER_MARKUP  # ml.* estimate


def _running(cloud, dataset, tmp_path, max_eur=None):
    plan = h.sm_plan(dataset, instance="p3.2xlarge")
    if max_eur is not None:
        plan = plan.model_copy(update={"max_eur": max_eur})
    ledger = h.ledger_at(tmp_path)
    be = SageMakerBackend(poll_seconds=0)
    run = ledger.create(h.new_run(tmp_path, plan))
    run = service.submit(plan, be, ledger, run)
    steps = [h.step("InProgress", "Starting", 0), h.step("InProgress", "Training", 60)]
    cloud.script(steps, job=run.backend_ref.rsplit("/", 1)[1])
    for _ in steps:
        run, status, _ = service.sync(run, be, ledger)
    assert status.state == "running" and run.started_at is not None
    return run, be, ledger


def _epoch(n: int) -> EpochMetrics:
    return EpochMetrics(epoch=n, samples=80, samples_per_sec=10.0, epoch_seconds=8.0,
                        train_loss=1.0, train_acc=0.5, lr=0.01)  # fmt: skip


def test_euros_so_far_and_projected_by_hand(cloud, tiny_dataset, tmp_path):
    run, _be, _ledger = _running(cloud, tiny_dataset, tmp_path)
    now = run.started_at + 1800  # half an hour into the job
    s = spend(run, now, done=0.25)
    assert s.eur == pytest.approx(1800 * USD_PER_HOUR / 3600 / LATEST_RATE, rel=1e-9)
    # a quarter done in 1,800 s: 5,400 s to go at the same price
    assert s.projected == pytest.approx(7200 * USD_PER_HOUR / 3600 / LATEST_RATE, rel=1e-9)
    assert s.text() == f"EUR {s.eur:.2f} so far, ~{s.projected:.2f} projected"


def test_a_projected_total_past_max_eur_stops_the_job_and_the_ledger_says_why(
    cloud, tiny_dataset, tmp_path
):
    # one epoch of two done after an hour: ~2 h in all, ~7.40 EUR; a cap of 5 is passed
    run, be, ledger = _running(cloud, tiny_dataset, tmp_path, max_eur=5.0)
    run = guard_budget(run, be, ledger, [_epoch(0)], now=run.started_at + 3600)
    (stop,) = cloud.requests("StopTrainingJob")
    assert stop.json == {"TrainingJobName": run.backend_ref.rsplit("/", 1)[1]}
    assert run.status == "stopping"
    (why,) = [m for _, kind, m in ledger.events(run.id) if kind == "budget"]
    projected = 2 * 3600 * USD_PER_HOUR / 3600 / LATEST_RATE
    assert f"projected total ~EUR {projected:.2f}" in why and "--max-eur 5" in why
    assert run.exit_reason == why


def test_a_projected_total_within_max_eur_lets_the_job_run(cloud, tiny_dataset, tmp_path):
    run, be, ledger = _running(cloud, tiny_dataset, tmp_path, max_eur=10.0)
    # the smoke recipe's 2 epochs: one done after an hour projects ~7.40 EUR, under 10
    after = guard_budget(run, be, ledger, [_epoch(0)], now=run.started_at + 3600)
    assert cloud.requests("StopTrainingJob") == [] and after.status == "running"
    assert [kind for _, kind, _ in ledger.events(run.id) if kind == "budget"] == []
