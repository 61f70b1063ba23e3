"""`finetune runs rm` and `runs prune`: local folders and ledger rows go, nothing else does,
and a run that is still running is never removed."""

from __future__ import annotations

import sqlite3
import subprocess
import time

from typer.testing import CliRunner

from finetune.cli import app
from finetune.runs.ledger import open_default
from finetune.runs.run import Run
from finetune.service.launch import runs_dir

DAY = 86400


def _add(run_id: str, status: str = "completed", age_days: float = 0, **kw) -> Run:
    """A run in the ledger with an epoch and events, and (by default) its own folder."""
    from finetune.contracts.metrics import EpochMetrics

    folder = kw.pop("run_dir", None) or runs_dir() / run_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.log").write_text("x" * 1000)
    created = time.time() - age_days * DAY
    run = Run(run_id, created, "smoke", "shapes", kw.pop("backend", "local"), status, {},
              run_dir=str(folder), **kw)  # fmt: skip
    with open_default() as ledger:
        ledger.create(run)
        ledger.record_epochs(run_id, [EpochMetrics(epoch=0, samples=8, samples_per_sec=1.0,
                                                   epoch_seconds=1.0, train_loss=1.0,
                                                   train_acc=0.5, lr=0.1)])  # fmt: skip
        ledger.add_event(run_id, "note", "hello")
    return run


def _rows(run_id: str) -> int:
    with open_default() as ledger:
        path = ledger.path
    with sqlite3.connect(path) as conn:
        return sum(
            conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {col} = ?", (run_id,)).fetchone()[0]
            for table, col in (("runs", "id"), ("epochs", "run_id"), ("events", "run_id"))
        )


def invoke(*args):
    return CliRunner().invoke(app, ["runs", *args])


def test_rm_removes_the_folder_and_every_ledger_row_but_not_what_it_links_to(tmp_path):
    outside = tmp_path / "dataset.rec"
    outside.write_bytes(b"records")
    run = _add("ft-20260101-000000-aaaa")
    (runs_dir() / run.id / "ml").mkdir()
    (runs_dir() / run.id / "ml" / "train.rec").symlink_to(outside)
    _add("ft-20260101-000000-bbbb")
    assert _rows(run.id) == 4  # run, epoch, created + note events

    dry = invoke("rm", "ft-20260101-000000-a", "--dry-run")
    assert dry.exit_code == 0 and "Would remove 1 run(s)" in dry.output
    assert (runs_dir() / run.id).is_dir() and _rows(run.id) == 4

    res = invoke("rm", "ft-20260101-000000-a")
    assert res.exit_code == 0, res.output
    assert f"Removed 1 run(s) (0.0 MB on disk): {run.id}" in res.output
    assert not (runs_dir() / run.id).exists() and _rows(run.id) == 0
    assert outside.read_bytes() == b"records"  # a link's target is not the run's
    assert (runs_dir() / "ft-20260101-000000-bbbb").is_dir()  # the other run stays
    assert [p.name for p in runs_dir().iterdir()] == ["ft-20260101-000000-bbbb"]  # no temp

    again = invoke("rm", run.id)
    assert again.exit_code == 3 and "no run" in again.output and "To fix:" in again.output


def test_a_running_run_is_refused_until_it_has_ended():
    proc = subprocess.Popen(["sleep", "60"])  # stands in for the local runner process
    try:
        run = _add("ft-20260101-000000-live", status="running", backend_ref=str(proc.pid),
                   age_days=40)  # fmt: skip
        (runs_dir() / run.id / "runner.json").write_text('{"started_at": 1}')  # it started
        res = invoke("rm", run.id)
        assert res.exit_code == 2, res.output
        assert f"run {run.id} is running" in res.output and "finetune runs stop" in res.output
        pruned = invoke("prune", "--older-than", "30d")
        assert pruned.exit_code == 0 and f"Kept {run.id}: it is running" in pruned.output
        assert (runs_dir() / run.id).is_dir() and _rows(run.id) == 4
    finally:
        proc.kill()
        proc.wait()
    res = invoke("rm", run.id)  # its process is gone: the backend says it ended
    assert res.exit_code == 0, res.output
    assert not (runs_dir() / run.id).exists()


def test_prune_removes_old_ended_runs_only_and_touches_no_cloud(tmp_path):
    old = _add("ft-20250101-000000-old1", age_days=40)
    cloud = _add("ft-20250101-000000-sm01", age_days=31, backend="sagemaker", status="failed")
    mine = _add("ft-20250101-000000-mine", age_days=45, run_dir=tmp_path / "elsewhere")
    recent = _add("ft-20260101-000000-new1", age_days=2)

    dry = invoke("prune", "--older-than", "30d", "--dry-run")
    assert dry.exit_code == 0 and "Would remove 3 run(s)" in dry.output
    assert all(_rows(r.id) for r in (old, cloud, mine, recent))

    res = invoke("prune", "--older-than", "30d")  # no AWS credentials here: none needed
    assert res.exit_code == 0, res.output
    assert "Removed 3 run(s)" in res.output
    assert all(_rows(r.id) == 0 for r in (old, cloud, mine)) and _rows(recent.id) == 4
    assert not (runs_dir() / old.id).exists() and not (runs_dir() / cloud.id).exists()
    assert (tmp_path / "elsewhere").is_dir()  # not finetune's folder: left, and said so
    assert f"Left {tmp_path / 'elsewhere'} in place" in res.output

    bad = invoke("prune", "--older-than", "a month")
    assert bad.exit_code == 2 and "is not a duration" in bad.output
