"""`runs show` and `cost-report` say the same euros, rounded the same way, for every kind of run:
driven through the real CLI on a real SQLite ledger, each figure computed by hand here.

Rate pinned at 1 EUR = 1.16 USD for the day the runs ended (2025-10-09).
"""

from __future__ import annotations

import json
from datetime import date

import pytest
from runfacts import pin_eur_rate
from typer.testing import CliRunner

from finetune.cli import app
from finetune.estimate.money import EC2, SAGEMAKER, Charge
from finetune.runs.ledger import open_default
from finetune.runs.run import Run

RATE = 1.16
T0 = 1_760_000_000.0  # 2025-10-09 08:53 UTC


def ec2(seconds, usd, instances=1, itype="g5.xlarge", spot=False, by_ec2=False, n=1):
    return Charge(
        EC2,
        itype,
        instances,
        seconds,
        usd,
        price_source="recorded at launch (test)",
        price_as_of="2025-10-09",
        market="spot" if spot else "on-demand",
        interrupted_by_ec2=by_ec2,
        started_at=T0,
        ended_at=T0 + seconds,
        label=f"attempt {n}",
    ).to_dict()


def sm(billable, usd, instances=1, itype="ml.p3.2xlarge", spot=False, training=None):
    return Charge(
        SAGEMAKER,
        itype,
        instances,
        billable,
        usd,
        price_source="AWS list price (test)",
        price_as_of="2025-05-31",
        market="spot" if spot else "on-demand",
        started_at=T0,
        ended_at=T0 + (training or billable),
        training_seconds=training,
    ).to_dict()


# run id -> (backend, instance type, hosts, spot, charges, hand-computed euros)
RUNS = {
    "ft-local": ("local", None, 1, False, [], 0.0),
    # 2 x p3.8xlarge for one hour at USD 12.24/h: 24.48 / 1.16
    "ft-ec2-2hosts": ("ec2", "p3.8xlarge", 2, False, [ec2(3600, 12.24, 2, "p3.8xlarge")], 21.1034),
    # spot at the USD 0.45/h recorded for the attempt, 1800 s: 0.225 / 1.16
    "ft-ec2-spot": ("ec2", "g5.xlarge", 1, True, [ec2(1800, 0.45, spot=True)], 0.193966),
    # attempt 1 interrupted by EC2 after 1200 s: free; attempt 2, 2400 s at 0.42: 0.28 / 1.16
    "ft-ec2-interrupted": (
        "ec2",
        "g5.xlarge",
        1,
        True,
        [ec2(1200, 0.40, spot=True, by_ec2=True), ec2(2400, 0.42, spot=True, n=2)],
        0.241379,
    ),
    # 620 s x USD 4.131/h = 0.71145; / 1.16
    "ft-sm": ("sagemaker", "p3.2xlarge", 1, False, [sm(620, 4.131)], 0.613319),
    # managed spot: 320 billable of 920 trained, at the on-demand 4.131: 0.3672 / 1.16
    "ft-sm-spot": (
        "sagemaker",
        "p3.2xlarge",
        1,
        True,
        [sm(320, 4.131, spot=True, training=920)],
        0.316552,
    ),
    # 2 x ml.p3.8xlarge, 1200 billable seconds each at 14.688: 9.792 / 1.16
    "ft-sm-2": (
        "sagemaker",
        "p3.8xlarge",
        2,
        False,
        [sm(1200, 14.688, 2, "ml.p3.8xlarge")],
        8.441379,
    ),
}


@pytest.fixture
def ledger_of_every_kind():
    pin_eur_rate(date(2025, 10, 9), RATE)
    with open_default() as led:
        for i, (rid, (backend, itype, hosts, spot, charges, _)) in enumerate(RUNS.items()):
            led.create(_run(rid, i, backend, itype, hosts, spot, charges=charges))
        # an EC2 run as finetune recorded it before ledger schema 4: billable seconds summed
        # over both hosts (7200), euros in cost_eur and cost_json; it must read 24.48 / 1.16
        old = {"attempt": 1, "instance_id": "i-1", "instance_type": "p3.8xlarge", "hosts": 2,
               "market": "on-demand", "running_seconds": 3600.0, "billable_seconds": 3600,
               "usd_per_hour": 12.24, "price_source": "catalog", "eur": 20.89}  # fmt: skip
        led.create(_run("ft-ec2-legacy", 9, "ec2", "p3.8xlarge", 2, False))
        led.update("ft-ec2-legacy", billable_seconds=7200.0, cost_eur=20.89,
                   cost={"attempts": [old], "billing": "EC2 per second"})  # fmt: skip
    return {**{rid: r[-1] for rid, r in RUNS.items()}, "ft-ec2-legacy": 21.1034}


def _run(rid, i, backend, itype, hosts, spot, charges=()) -> Run:
    return Run(
        id=rid,
        created_at=T0 - 100 + i,
        recipe="caltech256-resnet152",
        dataset="caltech256",
        backend=backend,
        status="completed",
        plan={"hyperparameters": {"model": "resnet"}},
        instance_type=itype,
        hosts=hosts,
        devices_per_host=4,
        device_kind="gpu",
        spot=spot,
        region=None if backend == "local" else "us-east-1",
        started_at=T0,
        ended_at=T0 + 3600,
        charges=list(charges),
    )


def _cli(*args):
    # wide enough for one line per run (fitting narrower terminals is tested in test_render)
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    return res.output


def test_runs_show_and_cost_report_agree_on_every_run(ledger_of_every_kind):
    report = {r["run_id"]: r for r in json.loads(_cli("cost-report", "--format", "json"))["runs"]}
    table = _cli("cost-report").splitlines()
    assert set(report) == set(ledger_of_every_kind)
    for rid, by_hand in ledger_of_every_kind.items():
        shown = json.loads(_cli("runs", "show", rid, "--json"))
        assert shown["money"]["eur"] == report[rid]["eur"]  # the same float, not just close
        assert report[rid]["eur"] == pytest.approx(by_hand, rel=1e-5), rid
        text = _cli("runs", "show", rid)
        (row,) = [line for line in table if line.startswith(rid + " ")]
        assert f" {by_hand:.2f} " in f" {row} "  # the EUR column, 2 decimals
        if by_hand:
            assert f"cost       EUR {by_hand:.2f}; 1 EUR = 1.1600 USD on 2025-10-09" in text


def test_report_counts_each_host_once(ledger_of_every_kind):
    """The 1 h on 2 x p3.8xlarge that read 20.89 in `runs show` and 41.77 in `cost-report`."""
    row = {r["run_id"]: r for r in json.loads(_cli("cost-report", "--format", "json"))["runs"]}
    for rid in ("ft-ec2-2hosts", "ft-ec2-legacy"):
        assert row[rid]["billable_seconds"] == 3600 and row[rid]["hosts"] == 2
        assert row[rid]["eur"] == pytest.approx(2 * 12.24 / RATE)
    assert row["ft-sm-spot"]["spot_savings"] == pytest.approx(1 - 320 / 920)
    assert "no charge (AWS spot billing)" in _cli("runs", "show", "ft-ec2-interrupted")
