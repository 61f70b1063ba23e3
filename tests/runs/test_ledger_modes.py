"""Issue 49, N11: the run ledger holds every run's plan, dataset paths and exit reasons; it
is its owner's only. Under the usual umask (022) a fresh ledger is 0600 in a 0700 folder
(SQLite's -wal and -shm files too), and a ledger an older finetune made 0644 is narrowed to
0600 the next time a command opens it. A folder that already exists keeps its mode."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from finetune.runs.ledger import open_default
from finetune.runs.run import Run


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _ledger_files(folder: Path) -> dict[str, int]:
    return {p.name: _mode(p) for p in folder.iterdir() if p.name.startswith("ledger")}


def test_a_new_ledger_is_private_in_a_private_folder(umask_022, tmp_path, monkeypatch):
    data = tmp_path / "fresh" / "data"
    monkeypatch.setenv("FINETUNE_DATA_DIR", str(data))
    with open_default() as ledger:
        ledger.create(Run("ft-modes", 0.0, "smoke", "d", "local", "completed", {}))
        files = _ledger_files(data)  # while open: the -wal and -shm files are there
    assert _mode(data) == 0o700
    assert set(files) >= {"ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"}, files
    assert set(files.values()) == {0o600}, files


def test_an_older_world_readable_ledger_is_narrowed_when_opened(umask_022, tmp_path, monkeypatch):
    data = tmp_path / "shared"
    data.mkdir(mode=0o755)
    sqlite3.connect(data / "ledger.sqlite").close()  # as SQLite makes it: 0644 here
    assert _mode(data / "ledger.sqlite") == 0o644
    monkeypatch.setenv("FINETUNE_DATA_DIR", str(data))
    with open_default(read_only_ok=True) as ledger:
        assert ledger.list() == []
    assert _mode(data / "ledger.sqlite") == 0o600
    assert _mode(data) == 0o755  # a folder that existed is the user's to set
