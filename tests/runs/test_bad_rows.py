"""One bad row never hides the ledger: a real SQLite ledger with a run whose end is a few
seconds before its start (AWS's clock vs ours), one whose times make no sense, one with a
negative charge and one with hand-damaged JSON, beside a good run -- every reader of the
ledger, driven through the CLI, shows the good runs and names each bad row's problem."""

from __future__ import annotations

import json
import sqlite3
from datetime import date

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.contracts.metrics import EpochMetrics
from finetune.estimate.money import EC2, Charge
from finetune.runs.ledger import open_default
from finetune.runs.run import Run
from tests.report.runfacts import pin_eur_rate

T0 = 1_750_075_200.0  # 2025-06-16 12:00 UTC
SKEW = 4.2  # seconds AWS's end time lies before our start time
SWEEP = "sw-bad"


def _epochs(n=2):
    return [EpochMetrics(epoch=i, samples=100, samples_per_sec=50.0, epoch_seconds=2.0,
                         train_loss=1.0, train_acc=0.5, val_acc=0.5, lr=0.01)
            for i in range(n)]  # fmt: skip


def _run(rid, i, **kw):
    base = dict(id=rid, created_at=T0 + i, recipe="smoke", dataset="d", backend="local",
                status="completed", plan={"hyperparameters": {"model": "resnet18_v1"}},
                started_at=T0, ended_at=T0 + 100, sweep_id=SWEEP, sweep_cell=rid)  # fmt: skip
    return Run(**{**base, **kw})


@pytest.fixture
def bad_ledger():
    pin_eur_rate(date(2025, 6, 16), 1.25)
    sm = dict(backend="sagemaker", instance_type="ml.p3.2xlarge", device_kind="gpu",
              region="us-east-1", status="failed",
              plan={"estimate": {"hourly_usd": 3.825, "price_source": "test price"}})  # fmt: skip
    with open_default() as led:
        led.create(_run("ft-good", 0))
        # failed at once: no billable seconds, SageMaker's end 4.2 s before our submit time
        led.create(_run("ft-skew", 1, started_at=T0 + 10, ended_at=T0 + 10 - SKEW, **sm))
        led.create(_run("ft-far", 2, started_at=T0 + 7200, ended_at=T0, **sm))
        neg = Charge(EC2, "g5.xlarge", 1, -5.0, 1.0, "test price", ended_at=T0)
        led.create(_run("ft-neg", 3, backend="ec2", instance_type="g5.xlarge",
                        charges=[neg.to_dict()]))  # fmt: skip
        led.create(_run("ft-broken", 4))
        for rid in ("ft-good", "ft-skew", "ft-far", "ft-neg", "ft-broken"):
            led.record_epochs(rid, _epochs())
        path = led.path
    with sqlite3.connect(path) as conn:  # a hand edit gone wrong
        conn.execute("UPDATE runs SET plan_json = '{\"hyper' WHERE id = 'ft-broken'")
        conn.execute("UPDATE epochs SET metrics_json = 'oops' WHERE run_id = 'ft-broken'"
                     " AND epoch = 1")  # fmt: skip
    return path


def _cli(*args):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})


def test_runs_list_shows_every_row_and_each_problem(bad_ledger):
    res = _cli("runs", "list")
    assert res.exit_code == 0, res.output
    for rid in ("ft-good", "ft-skew", "ft-far", "ft-neg", "ft-broken"):
        assert rid in res.output
    assert f"ft-skew: clock skew of {SKEW} s clamped" in res.output
    assert "ft-far: cannot be costed: run ft-far ends 7200 s before it starts" in res.output
    assert "ft-neg: cannot be costed: Billed seconds" in res.output
    assert "ft-broken: its plan_json column is damaged" in res.output
    assert "ft-broken: its metrics of epoch 1 are damaged" in res.output
    assert "corrupt" not in res.output
    rows = {r["id"]: r for r in json.loads(_cli("runs", "list", "--json").stdout)}
    assert rows["ft-good"]["problems"] == [] and rows["ft-good"]["cost_eur"] == 0
    assert rows["ft-skew"]["cost_eur"] == 0 and rows["ft-skew"]["wall_seconds"] == 0
    assert rows["ft-skew"]["notes"] == [
        f"clock skew of {SKEW} s clamped: its end time is before its start"
    ]
    assert rows["ft-neg"]["money"] is None and rows["ft-neg"]["problems"]
    assert len(rows["ft-broken"]["epochs"]) == 1  # the damaged epoch is left out, and named


def test_runs_show_of_each_row(bad_ledger):
    skew = _cli("runs", "show", "ft-skew")
    assert skew.exit_code == 0, skew.output
    assert f"wall 0s (clock skew of {SKEW} s clamped" in skew.output
    assert "EUR 0.00" in skew.output and f"clock skew of {SKEW} s clamped" in skew.output
    for rid, problem in (("ft-far", "cannot be costed"), ("ft-neg", "cannot be costed"),
                         ("ft-broken", "plan_json column is damaged")):  # fmt: skip
        res = _cli("runs", "show", rid)
        assert res.exit_code == 0, res.output
        assert problem in res.output and "corrupt" not in res.output
    data = json.loads(_cli("runs", "show", "ft-neg", "--json").stdout)
    assert data["money"] is None and "negative" in data["problems"][0]


def test_cost_report_and_sweep_report_skip_with_a_note(bad_ledger):
    res = _cli("cost-report")
    assert res.exit_code == 0, res.output
    assert "ft-good" in res.output and "ft-skew" in res.output
    assert f"ft-skew: clock skew of {SKEW} s clamped" in res.output
    assert "ft-far: skipped" in res.output and "ft-neg: skipped" in res.output
    assert "ft-broken" in res.output  # its damaged epoch left out; the rest reported
    sweep = _cli("cost-report", "--sweep", SWEEP, "--format", "json")
    assert sweep.exit_code == 0, sweep.output
    notes = json.loads(sweep.stdout)["notes"]
    assert any(n.startswith("ft-neg: skipped") for n in notes), notes


def test_prune_and_estimates_read_past_a_damaged_row(bad_ledger, tiny_dataset):
    res = _cli("runs", "prune", "--older-than", "30d", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "ft-broken" in res.output and "ft-good" in res.output
    # a cloud sweep's estimates learn from the ledger's measured history (runs.facts)
    plan = _cli("sweep", "smoke-resnet18", "--dataset", str(tiny_dataset), "--backend", "ec2",
                "--grid", "instance=g5.xlarge", "--dry-run")  # fmt: skip
    assert plan.exit_code == 0, plan.output
    assert "g5.xlarge" in plan.output


def test_a_run_of_an_unknown_backend_is_listed_with_its_problem(bad_ledger):
    with open_default() as led:  # e.g. written by a newer finetune with another backend
        led.create(_run("ft-alien", 9, backend="quantum", status="running"))
    res = _cli("runs", "list")
    assert res.exit_code == 0, res.output
    assert "ft-good" in res.output and "ft-alien" in res.output
    assert 'ft-alien: its backend could not say where it is: unknown backend "quantum"' in (
        res.output
    )


def test_a_damaged_run_is_not_resumed(bad_ledger):
    with open_default() as led:
        led.update("ft-broken", status="interrupted")
    res = _cli("launch", "--resume", "ft-broken")
    assert res.exit_code == 3, res.output
    assert "cannot be resumed" in res.output and "plan_json column is damaged" in res.output
    assert "To fix:" in res.output


def test_a_live_local_run_with_a_damaged_exit_file_is_listed(bad_ledger, tmp_path):
    run_dir = tmp_path / "ft-cut"
    run_dir.mkdir()
    (run_dir / "exit.json").write_text('{"code": 0, "sta')  # cut short by a crash
    with open_default() as led:
        led.create(_run("ft-cut", 9, status="running", run_dir=str(run_dir), backend_ref="1"))
    res = _cli("runs", "list")
    assert res.exit_code == 0, res.output
    assert "ft-good" in res.output and "ft-cut: its backend could not say where it is" in (
        res.output
    )


def test_cleanup_reads_past_damaged_rows(bad_ledger, aws, monkeypatch):
    monkeypatch.setenv("FINETUNE_REGION", "us-east-1")
    with open_default() as led:  # a launch long ago whose launcher record is damaged
        led.create(_run("ft-launch", 9, status="submitted", started_at=None, ended_at=None))
        led.add_event("ft-launch", "submitting", "[1, 2]")
    res = _cli("cleanup", "--older-than", "1h")
    assert res.exit_code == 0, res.output
    assert "Nothing to clean up" in res.output
