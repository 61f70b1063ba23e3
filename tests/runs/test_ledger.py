"""The SQLite run ledger: round trips, migrations, concurrency, bad files."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from contextlib import closing

import pytest

from finetune.contracts.metrics import EpochMetrics
from finetune.errors import DataError
from finetune.runs.ledger import Ledger
from finetune.runs.ledger_schema import MIGRATIONS, SCHEMA_VERSION
from finetune.runs.run import Run, new_run_id


def _run(run_id: str | None = None, recipe: str = "smoke", **kw) -> Run:
    return Run(
        id=run_id or new_run_id(),
        created_at=0.0,
        recipe=recipe,
        dataset="/data/shapes",
        backend="local",
        status="submitted",
        plan={"recipe": {"name": recipe}, "lr": 0.01},
        **kw,
    )


def _epoch(i: int, acc: float) -> EpochMetrics:
    return EpochMetrics(
        epoch=i,
        samples=80,
        samples_per_sec=40.0 + i,
        epoch_seconds=2.0,
        train_loss=1.0,
        train_acc=acc,
        val_acc=acc,
        lr=0.01,
    )


def test_round_trip_and_prefix_lookup(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        r = led.create(_run("ft-20260101-000000-abcd", devices_per_host=2, spot=True))
        got = led.get("ft-20260101-000000-ab")
        assert got.plan == r.plan and got.spot is True and got.gpus == 2
        led.update(r.id, status="running", started_at=100.0)
        led.update(r.id, status="completed", ended_at=160.0, cost={"eur": 1.5}, cost_eur=1.5)
        done = led.get(r.id)
        assert (done.status, done.wall_seconds, done.cost) == ("completed", 60.0, {"eur": 1.5})
        kinds = [k for _, k, _ in led.events(r.id)]
        assert kinds == ["created", "status", "status"]


def test_hosts_live_in_the_instance_count_column_older_versions_read(tmp_path):
    """Run.hosts (issue 20: hosts are hosts) keeps its column's name: a ledger written before
    reads as it is, and a version before reads this one."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        led.create(_run("ft-h", hosts=3, devices_per_host=2))
        assert (led.get("ft-h").hosts, led.get("ft-h").gpus) == (3, 6)
        led.update("ft-h", hosts=4)
    with closing(sqlite3.connect(path)) as raw:
        assert raw.execute("SELECT instance_count FROM runs WHERE id = 'ft-h'").fetchone() == (4,)
        raw.execute("UPDATE runs SET instance_count = 2 WHERE id = 'ft-h'")  # as an old one
        raw.commit()
    with Ledger(path) as led:
        assert led.get("ft-h").hosts == 2
        with pytest.raises(ValueError, match="not columns of runs: nodes"):
            led.update("ft-h", nodes=1)


def test_unknown_and_ambiguous_ids(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        led.create(_run("ft-a-1"))
        led.create(_run("ft-a-2"))
        with pytest.raises(DataError, match="matches 2 runs"):
            led.get("ft-a")
        with pytest.raises(DataError, match=r'Did you mean "ft-a-[12]"'):
            led.get("ft-a-3")
        with pytest.raises(DataError, match="finetune runs list"):
            led.update("nope", status="failed")


def test_list_filters_and_epochs_upsert(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        a = led.create(_run(recipe="a"))
        led.create(_run(recipe="b"))
        assert [r.recipe for r in led.list(recipe="a")] == ["a"]
        led.record_epochs(a.id, [_epoch(0, 0.2), _epoch(1, 0.4)])
        led.record_epochs(a.id, [_epoch(1, 0.5)])  # a resumed run reports epoch 1 again
        assert [(e.epoch, e.val_acc) for e in led.epochs(a.id)] == [(0, 0.2), (1, 0.5)]


def test_old_schema_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0])
    conn.execute(
        "INSERT INTO runs (id, created_at, updated_at, recipe, dataset, backend, status,"
        " plan_json) VALUES ('ft-old', 1, 1, 'r', 'd', 'local', 'completed', '{}')"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with Ledger(path) as led:
        old = led.get("ft-old")
        assert old.status == "completed" and old.cost_eur is None
        led.update("ft-old", billable_seconds=12.0)
        assert led.get("ft-old").billable_seconds == 12.0
    with closing(sqlite3.connect(path)) as conn:  # closed: a test leaves no lock held
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_newer_schema_and_corrupt_file_are_clear_errors(tmp_path):
    newer = tmp_path / "new.sqlite"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(DataError, match="newer than this finetune"):
        Ledger(newer)
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(DataError, match="cannot be opened"):
        Ledger(bad)


def _writer(path: str, prefix: str, n: int) -> None:
    with Ledger(path) as led:
        for i in range(n):
            run = led.create(_run(f"{prefix}-{i}"))
            led.update(run.id, status="running")
            led.record_epochs(run.id, [_epoch(0, 0.1)])


def test_concurrent_writers(tmp_path):
    path = str(tmp_path / "l.sqlite")
    Ledger(path).close()
    procs = [mp.get_context("fork").Process(target=_writer, args=(path, p, 40)) for p in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Ledger(path) as led:
        runs = led.list()
        assert len(runs) == 80 and all(r.status == "running" for r in runs)
