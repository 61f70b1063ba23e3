"""Issue 34, item 6: what the hostile probe of 2026-11-27 found around the run ledger, each
through the real CLI (CliRunner) on a real SQLite file.

- A ledger another process holds locked (a backup, a DB browser): a short wait, then a
  message that says so and to try again -- never "move the file aside (it may be corrupt)",
  which would throw the history away for a lock that frees itself.
- FINETUNE_LEDGER under a regular file, or naming a device (/dev/null): a clear refusal.
- A command that only reads (`runs list`) creates no folders and no file.
- A ledger written by a newer finetune (a higher schema version) is refused, kept intact.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.runs import storage
from finetune.runs.ledger import Ledger
from finetune.runs.run import Run, new_run_id

HOLD = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(60)
"""


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _clear(res, code: int, *phrases: str) -> str:
    out = res.output
    assert res.exit_code == code, out
    assert "Traceback" not in out and "To fix:" in out, out
    for phrase in phrases:
        assert phrase in out, out
    return out


@pytest.fixture
def ledger_file(tmp_path, monkeypatch):
    path = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("FINETUNE_LEDGER", str(path))
    with Ledger(path) as ledger:
        ledger.create(Run(new_run_id(), 0.0, "smoke", "d", "local", "completed", {}))
    return path


def test_a_ledger_locked_by_another_process_says_so_and_keeps_it(ledger_file, monkeypatch):
    monkeypatch.setattr(storage, "LOCK_WAIT_S", 0.3)  # the wait itself is not under test
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ledger_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        for args in (["runs", "list"], ["runs", "stop", "ft-none"]):
            out = _clear(_cli(*args), 3, "locked by another process", "try again")
            assert "move the file aside" not in out and "corrupt" not in out
    finally:
        holder.kill()
        holder.wait()
    assert "smoke" in _cli("runs", "list").output  # nothing lost once the lock is gone


@pytest.mark.parametrize("under", ["a-file", "a-file/deeper"])
def test_a_ledger_path_under_a_regular_file_is_refused(tmp_path, monkeypatch, under):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("FINETUNE_LEDGER", str(tmp_path / under / "ledger.sqlite"))
    for args in (["runs", "list"], ["runs", "stop", "ft-none"]):
        _clear(_cli(*args), 4, "is a file, not a folder", "FINETUNE_LEDGER")
    assert (tmp_path / "a-file").read_text() == "not a folder"


def test_a_device_as_the_ledger_is_refused(monkeypatch):
    monkeypatch.setenv("FINETUNE_LEDGER", "/dev/null")
    for args in (["runs", "list"], ["runs", "stop", "ft-none"]):
        out = _clear(_cli(*args), 4, "/dev/null is not a regular file")
        assert "move the file aside" not in out


def test_a_read_only_listing_creates_nothing(tmp_path, monkeypatch):
    data = tmp_path / "not" / "yet"
    monkeypatch.setenv("FINETUNE_DATA_DIR", str(data))
    monkeypatch.delenv("FINETUNE_LEDGER", raising=False)
    res = _cli("runs", "list")
    assert res.exit_code == 0 and "No runs yet" in res.output, res.output
    assert _cli("runs", "list", "--json").output.strip() == "[]"
    assert not (tmp_path / "not").exists()


def test_a_ledger_of_a_newer_schema_is_refused_and_kept(ledger_file):
    conn = sqlite3.connect(ledger_file)
    conn.execute("PRAGMA user_version = 999")
    conn.commit()
    conn.close()
    before = ledger_file.read_bytes()
    for args in (["runs", "list"], ["runs", "stop", "ft-none"]):
        _clear(_cli(*args), 3, "newer than this finetune", "upgrade finetune")
    assert ledger_file.read_bytes() == before
