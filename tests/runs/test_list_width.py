"""`runs list` fits 120 columns as one table, with its widest rows: the full run id and the
longest built-in recipe name on one line each, 16 GPUs on two ml.p4d.24xlarge, the longest
status, euros so far with the projected total beside them (the devices wrap at their space
in rows this wide, as text does; numbers, ids and recipes never). A user's longer recipe name ends
in "…" in the table; JSON and CSV carry it whole."""

from __future__ import annotations

import csv
import io
import json
import time

from typer.testing import CliRunner

from finetune.cli import app
from finetune.estimate.money import Charge
from finetune.runs.ledger import open_default
from finetune.runs.run import Run

LONGEST_BUILTIN = "caltech256-efficientnet-v2-s"  # 28 characters
USERS = "caltech256-efficientnet-v2-s-long-warmup-sweep"


def _store(rid: str, recipe: str, status: str, started: float, **fields) -> None:
    charge = Charge(rule="sagemaker", instance_type="ml.p4d.24xlarge", instances=2, seconds=5.0,
                    usd_per_hour=37.688, price_source="recorded at launch",
                    started_at=started)  # fmt: skip
    run = Run(
        id=rid, created_at=started, recipe=recipe, dataset="/data/caltech256",
        backend="sagemaker", status=status, started_at=started, charges=[charge.to_dict()],
        plan={"hyperparameters": {"epochs": 6}, "estimate": {"seconds": 36000.0}},
        instance_type="ml.p4d.24xlarge", hosts=2, devices_per_host=8, device_kind="gpu",
        region="us-east-1", **fields,
    )  # fmt: skip
    with open_default() as ledger:
        ledger.create(run)


def _list(*args: str, columns: int = 120):
    res = CliRunner().invoke(app, ["runs", "list", *args], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.stdout


def test_the_widest_rows_fit_120_columns_as_one_table():
    now = time.time()
    _store("ft-20261127-034012-ab12", LONGEST_BUILTIN, "running", now - 4000)
    _store("ft-20261127-034013-cd34", USERS, "interrupted", now - 3000, ended_at=now - 10)
    table = _list()
    lines = table.splitlines()
    assert sum(line.startswith("─") for line in lines) == 1, table  # one header rule: one block
    assert max(len(line) for line in lines) <= 120, table
    at = next(i for i, line in enumerate(lines) if line.startswith("ft-20261127-034012-ab12"))
    running = lines[at]
    assert LONGEST_BUILTIN in running, table  # id and recipe whole, on the row's first line
    # the devices, text, may wrap at their space (only in rows this wide)
    assert "16 gpu" in running and "ml.p4d.24xlarge" in running + lines[at + 1], table
    assert "(~" in running, table  # the projected total beside the euros so far
    cut = next(line for line in lines if line.startswith("ft-20261127-034013-cd34"))
    assert f" {USERS[:27]}… " in cut and "interrupted" in cut, table
    records = json.loads(_list("--format", "json"))
    assert [r["recipe"] for r in records] == [LONGEST_BUILTIN, USERS]
    rows = list(csv.DictReader(io.StringIO(_list("--format", "csv"))))
    assert [(r["recipe"], r["backend"]) for r in rows] == [
        (LONGEST_BUILTIN, "sagemaker"),
        (USERS, "sagemaker"),
    ]
