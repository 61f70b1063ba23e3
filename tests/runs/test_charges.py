"""A ledger written before schema 4 (no charges) is migrated and its runs keep their money:
the cost records older versions wrote are read as charges and billed by estimate.money."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import date

import pytest

from finetune.catalog import fx
from finetune.catalog.usercache import cache_dir
from finetune.runs.charges import run_money
from finetune.runs.ledger import Ledger
from finetune.runs.ledger_schema import MIGRATIONS

T0 = 1_760_000_000.0  # 2025-10-09
EC2_RECORD = {  # as backends/ec2_cost.py wrote it: euros, and billable seconds summed per host
    "attempts": [
        {
            "attempt": 1,
            "instance_id": "i-1",
            "instance_type": "p3.8xlarge",
            "hosts": 2,
            "market": "on-demand",
            "running_seconds": 1800.0,
            "billable_seconds": 1800,
            "usd_per_hour": 12.24,
            "price_source": "catalog",
            "eur": 9.0,
            "outcome": "completed",
        },
    ],
    "billing": "EC2 per second",
}
SM_RECORD = {  # as backends/sagemaker_status.py wrote it
    "eur": 1.0,
    "billable_seconds": 900.0,
    "instance_count": 2,
    "instance_type": "ml.p3.2xlarge",
    "usd_per_hour": 4.0,
    "price_as_of": "2025-05-31",
    "price_source": "AWS list price (test)",
}


def _v3_ledger(path):
    with closing(sqlite3.connect(path)) as conn:
        for script in MIGRATIONS[:3]:
            conn.executescript(script)
        for rid, backend, record, billable in (
            ("ft-ec2", "ec2", EC2_RECORD, 3600.0),
            ("ft-sm", "sagemaker", SM_RECORD, 900.0),
        ):
            conn.execute(
                "INSERT INTO runs (id, created_at, updated_at, recipe, dataset, backend, status,"
                " plan_json, instance_type, instance_count, started_at, ended_at,"
                " billable_seconds, cost_eur, cost_json) VALUES"
                " (?, ?, ?, 'r', 'd', ?, 'completed', '{}', 'p3.8xlarge', 2, ?, ?, ?, 99.0, ?)",
                (rid, T0, T0, backend, T0, T0 + 3600, billable, json.dumps(record)),
            )
        conn.execute("PRAGMA user_version = 3")
        conn.commit()


def test_old_cost_records_are_read_as_charges(tmp_path):
    cache_dir().mkdir(parents=True)  # 1 EUR = 1.2 USD on the day the runs ended
    (cache_dir() / fx.CACHE_FILE).write_text(fx.to_csv({date(2025, 10, 9): (1.2, "test")}))
    _v3_ledger(tmp_path / "v3.sqlite")
    with Ledger(tmp_path / "v3.sqlite") as led:
        ec2, sm = led.get("ft-ec2"), led.get("ft-sm")
    assert ec2.charges == [] and sm.charges == []  # the new column, empty for old rows
    # 2 hosts x 1800 s x USD 12.24/h = USD 12.24 -> EUR 10.20 (not the stored 99 or the
    # per-host sum of 3600 billable seconds multiplied by 2 again)
    assert run_money(ec2).eur == pytest.approx(10.2)
    # 2 instances x 900 s x USD 4/h = USD 2 -> EUR 1.6667
    assert run_money(sm).eur == pytest.approx(2 / 1.2)
