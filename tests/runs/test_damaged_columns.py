"""Issue 49, item 7: one damaged ledger row (a time beyond any date, text where a time
belongs, a blob, a lost end time, a plan whose parts are not mappings) never hides the others:
on a real SQLite ledger, `runs list` (table, JSON, CSV), `runs show`, `runs prune` and
`cost-report` list every row, name what is damaged and say how to remove it."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.runs.ledger import open_default
from finetune.runs.run import Run

T0 = 1_750_075_200.0  # 2025-06-16 12:00 UTC
IDS = "ft-20250616-120001-00aa"  # a run id carries its creation time (new_run_id)
DAMAGED = {  # run id -> the hand edit (SQL) that damaged it
    IDS: "created_at = 'yesterday'",  # recovered from the id
    "ft-text": "created_at = 'yesterday'",  # no time in this id: its age is unknown
    "ft-far": "started_at = 1e20, ended_at = 1e20 + 5",  # beyond the year 9999
    "ft-blob": "started_at = X'00ff', instance_count = 'many', spot = 'x'",
    "ft-plan": """plan_json = '{"hyperparameters": 5, "derived": []}'""",
}
# NaN: SQLite stores NULL, so the end is lost; NULL is a valid value, only its status says
DAMAGE = {**DAMAGED, "ft-noend": "ended_at = 1e999 - 1e999"}


@pytest.fixture
def damaged():
    with open_default() as led:
        for i, rid in enumerate(["ft-good", *DAMAGE]):
            led.create(Run(rid, T0 + i, "smoke", "d", "local", "completed",
                           {"hyperparameters": {"model": "resnet18_v1"}, "estimate": None},
                           started_at=T0, ended_at=T0 + 100))  # fmt: skip
        path = led.path
    with sqlite3.connect(path) as conn:
        for rid, edit in DAMAGE.items():
            conn.execute(f"UPDATE runs SET {edit} WHERE id = ?", (rid,))


def _cli(*args):
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert res.exit_code == 0 and res.exception is None, (args, res.output, res.exception)
    return res.output


def test_list_names_each_damaged_row_and_how_to_remove_it(damaged):
    out = _cli("runs", "list")
    assert "ft-good" in out
    assert "ft-noend" in out
    for rid in DAMAGED:
        assert f"{rid}: a damaged row" in out and f"`finetune runs rm {rid}`" in out
    assert "ft-far: its started_at column is damaged (1e+20, not a time" in out
    assert "ft-blob: its instance_count column is damaged ('many', not a count" in out
    assert "ft-plan: its plan_json column is damaged (hyperparameters is not a mapping" in out
    rows = {r["id"]: r for r in json.loads(_cli("runs", "list", "--format", "json"))}
    assert set(rows) == {"ft-good", *DAMAGE}
    assert rows["ft-good"]["damaged"] == [] and rows["ft-far"]["started_at"] is None
    assert rows[IDS]["created_at"] == "2025-06-16T12:00:01+00:00"  # from its id
    assert rows["ft-noend"]["wall_seconds"] is None  # not "until now": it ended, when unknown
    assert rows["ft-blob"]["damaged"] == ["spot", "started_at", "instance_count"]
    csv = _cli("runs", "list", "--format", "csv")
    assert all(rid in csv for rid in DAMAGE)


def test_show_explains_the_damage(damaged):
    for rid, column in (("ft-far", "ended_at"), ("ft-text", "created_at"),
                        ("ft-blob", "spot"), ("ft-plan", "plan_json")):  # fmt: skip
        out = _cli("runs", "show", rid)
        assert f"problem    its {column} column is damaged" in out
        assert f"remove it: `finetune runs rm {rid}`" in out
        assert json.loads(_cli("runs", "show", rid, "--format", "json"))["problems"]


def test_prune_removes_old_rows_and_keeps_one_of_unknown_age(damaged):
    out = _cli("runs", "prune", "--older-than", "1d")
    removed = out.splitlines()[0]
    assert all(rid in removed for rid in ("ft-good", IDS, "ft-far", "ft-blob", "ft-noend"))
    assert "ft-text" not in removed
    assert "Kept ft-text: its creation time is damaged, so its age is unknown" in out
    assert "`finetune runs rm ft-text`" in out
    assert "ft-text" in _cli("runs", "rm", "ft-text")
    with open_default() as led:
        assert led.list() == []


def test_cost_report_mentions_every_damaged_row(damaged):
    out = _cli("cost-report")
    assert "ft-noend: skipped: it is completed but its end time is unknown" in out
    assert "ft-far: skipped: it is completed but its end time is unknown" in out
    for rid in DAMAGED:
        assert f"{rid}: if it is of no more use, remove it: `finetune runs rm {rid}`" in out
    # --since: the row whose time its id gave is filtered by it; one of unknown age is kept
    later = time.strftime("%Y-%m-%d", time.gmtime(T0 + 86400))
    since = _cli("cost-report", "--since", later)
    assert "ft-text" in since and IDS not in since and "ft-good" not in since
