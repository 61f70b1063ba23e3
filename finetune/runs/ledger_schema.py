"""Ledger schema and its migrations, versioned with SQLite's PRAGMA user_version.

Each entry of MIGRATIONS upgrades the schema by one version; a ledger written by an older
finetune is migrated forward on open, inside one transaction (all or nothing).
"""

from __future__ import annotations

import sqlite3

from finetune.errors import DataError

MIGRATIONS: list[str] = [
    # v1: runs, per-epoch metrics, events
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        recipe TEXT NOT NULL,
        dataset TEXT NOT NULL,
        backend TEXT NOT NULL,
        instance_type TEXT,
        instance_count INTEGER NOT NULL DEFAULT 1,
        devices_per_host INTEGER NOT NULL DEFAULT 1,
        device_kind TEXT NOT NULL DEFAULT 'cpu',
        spot INTEGER NOT NULL DEFAULT 0,
        region TEXT,
        status TEXT NOT NULL,
        exit_reason TEXT,
        plan_json TEXT NOT NULL,
        run_dir TEXT,
        backend_ref TEXT,
        started_at REAL,
        ended_at REAL
    );
    CREATE INDEX runs_recipe ON runs(recipe, created_at);
    CREATE TABLE epochs (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        epoch INTEGER NOT NULL,
        samples_per_sec REAL,
        epoch_seconds REAL,
        train_acc REAL,
        val_acc REAL,
        metrics_json TEXT NOT NULL,
        PRIMARY KEY (run_id, epoch)
    );
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        time REAL NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL
    );
    CREATE INDEX events_run ON events(run_id, id);
    """,
    # v2: what the cloud reports after the run, and the money
    """
    ALTER TABLE runs ADD COLUMN training_seconds REAL;
    ALTER TABLE runs ADD COLUMN billable_seconds REAL;
    ALTER TABLE runs ADD COLUMN interrupted_seconds REAL;
    ALTER TABLE runs ADD COLUMN cost_eur REAL;
    ALTER TABLE runs ADD COLUMN cost_json TEXT;
    """,
    # v3: the reproducibility record (finetune version, git commit, dataset manifest hash)
    """
    ALTER TABLE runs ADD COLUMN record_json TEXT;
    """,
    # v4: the charges a backend reports (seconds, instances, the price paid and where it came
    # from; never euros): finetune.estimate.money turns them into euros whenever they are shown.
    # cost_eur and cost_json, written by older versions, stay (cost_json is still read
    # by runs/charges.py) but are no longer written.
    """
    ALTER TABLE runs ADD COLUMN charges_json TEXT;
    """,
    # v5: which sweep launched a run (`finetune sweep`), and its cell: the cell's identity
    # (recipe, dataset hash, engine, backend, grid values; finetune/sweep/grid.py) and values
    """
    ALTER TABLE runs ADD COLUMN sweep_id TEXT;
    ALTER TABLE runs ADD COLUMN sweep_cell TEXT;
    ALTER TABLE runs ADD COLUMN sweep_json TEXT;
    CREATE INDEX runs_sweep ON runs(sweep_id, sweep_cell);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to SCHEMA_VERSION; returns the version it had before."""
    conn.execute("BEGIN IMMEDIATE")  # one migrator at a time; others wait on busy_timeout
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise DataError(
                f"the run ledger has schema version {version}, newer than this finetune "
                f"understands ({SCHEMA_VERSION})",
                "upgrade finetune, or point FINETUNE_DATA_DIR at another data directory.",
            )
        for v in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[v].split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
        return version
    except BaseException:
        conn.execute("ROLLBACK")
        raise
