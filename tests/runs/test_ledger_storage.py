"""The run ledger on a read-only or a full disk: the CLI says so, with no traceback and no
'may be corrupt' advice."""

from __future__ import annotations

from finetune.runs.ledger import Ledger
from finetune.runs.run import Run, new_run_id
from tests.fs_faults import FULL, READ_ONLY, assert_clear_error, finetune_in


def test_read_only_data_dir(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    env = {"FINETUNE_DATA_DIR": str(data)}
    res = finetune_in(READ_ONLY, data, "runs", "stop", "ft-none", env=env)  # a writer
    assert_clear_error(res, 3, "cannot be written", "read-only", "FINETUNE_DATA_DIR")
    assert "corrupt" not in res.stderr
    # a command that only reads needs nothing written: no ledger yet is an empty one
    res = finetune_in(READ_ONLY, data, "runs", "list", env=env)
    assert res.returncode == 0 and "No runs yet" in res.stdout, res.stdout + res.stderr


def test_existing_ledger_on_a_read_only_disk(tmp_path):
    data = tmp_path / "data"
    with Ledger(data / "ledger.sqlite") as ledger:
        ledger.create(Run(new_run_id(), 0.0, "r", "d", "local", "completed", {}))
    res = finetune_in(READ_ONLY, data, "runs", "list", env={"FINETUNE_DATA_DIR": str(data)})
    out = res.stdout + res.stderr
    assert "Traceback" not in out and "corrupt" not in out, out
    if res.returncode:  # SQLite may need to write its shared-memory file even to read
        assert_clear_error(res, 3, "cannot be written", "read-only")


def test_full_disk(tmp_path):
    data = tmp_path / "full"
    data.mkdir()
    env = {"FINETUNE_DATA_DIR": str(data / "data")}
    res = finetune_in(FULL, data, "runs", "stop", "ft-none", env=env)
    assert_clear_error(res, 3, "is full", "nothing was half-written")
