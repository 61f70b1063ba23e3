"""SQLite run ledger (stdlib sqlite3, WAL): safe for several finetune processes at once.

Writers take the database lock up front (BEGIN IMMEDIATE) and wait up to 30 s for it, so two
concurrent launches never interleave half-written runs.
"""

from __future__ import annotations

import builtins  # Ledger.list shadows the builtin in the class's annotations
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from finetune.contracts.metrics import EpochMetrics
from finetune.errors import DataError, did_you_mean
from finetune.runs.run import COLUMNS, Run, column_values, from_row, to_row
from finetune.runs.storage import (
    StorageError,
    check_ledger_path,
    default_path,
    locked_error,
    open_read_only,
    open_read_write,
    storage_error,
)

LEDGER_FILE = "ledger.sqlite"


class Ledger:
    """Open (creating or migrating) the ledger at ``path``."""

    def __init__(self, path: str | Path, read_only_ok: bool = False) -> None:
        """``read_only_ok``: the caller only reads, so a ledger on a read-only (or full) disk
        is opened read-only rather than refused (``self.read_only`` then says so)."""
        self.path = Path(path)
        self.read_only: str | None = None  # why it was opened read-only
        if read_only_ok and not self.path.exists():
            # a command that only reads creates nothing (no folders, no file): no ledger yet
            # reads as an empty one
            check_ledger_path(self.path)
            self._conn = open_read_write(Path(":memory:"))
            return
        try:
            self._conn = open_read_write(self.path)
        except DataError as exc:
            if not (read_only_ok and isinstance(exc, StorageError) and self.path.is_file()):
                raise
            self._conn = open_read_only(self.path, exc)
            self.read_only = exc.what

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a read-only or full disk becomes a DataError that says so
        (the transaction is rolled back: nothing is half-written)."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                with suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            storage = storage_error(self.path, exc) or locked_error(self.path, exc)
            if storage is None:
                raise
            raise storage from None

    def create(self, run: Run) -> Run:
        """Insert a new run (status as given, usually 'submitted')."""
        now = time.time()
        run.created_at = run.created_at or now
        run.updated_at = now
        cols = to_row(run)
        with self._write() as c:
            # bandit B608 (SQL text): the column names are the Run dataclass's, values bound
            names, marks = ", ".join(cols), ", ".join("?" * len(cols))
            sql = f"INSERT INTO runs ({names}) VALUES ({marks})"  # nosec B608
            c.execute(
                sql,
                list(cols.values()),
            )
            self._event(c, run.id, "created", f"{run.backend} run of {run.recipe}")
        return run

    def update(self, run_id: str, **fields) -> Run:
        """Set columns of one run (plan, cost, charges and record are encoded as JSON);
        returns the new row."""
        fields = column_values(fields)
        fields["updated_at"] = time.time()
        unknown = set(fields) - COLUMNS
        if unknown:  # names go into the SQL text: only the table's own columns
            raise ValueError(f"not columns of runs: {', '.join(sorted(unknown))}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self._write() as c:
            # bandit B608 (SQL text): the names are checked against the columns above
            sql = f"UPDATE runs SET {sets} WHERE id = ?"  # nosec B608
            cur = c.execute(sql, [*fields.values(), run_id])
            if cur.rowcount == 0:
                raise self._unknown(run_id)
            if "status" in fields:
                self._event(c, run_id, "status", fields["status"])
        return self.get(run_id)

    def get(self, run_id: str) -> Run:
        """The run with this id, or an unambiguous prefix of one."""
        row = self._conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            rows = self._conn.execute(
                "SELECT * FROM runs WHERE id LIKE ? ORDER BY created_at", (run_id + "%",)
            ).fetchall()
            if len(rows) == 1:
                row = rows[0]
            elif len(rows) > 1:
                raise DataError(f"{run_id!r} matches {len(rows)} runs", "give more of the run id.")
        if row is None:
            raise self._unknown(run_id)
        return from_row(row)

    def list(
        self, recipe: str | None = None, since: float | None = None, sweep: str | None = None
    ) -> list[Run]:
        """Runs, oldest first, optionally of one recipe, created after ``since``, or launched
        by one sweep."""
        q = "SELECT * FROM runs WHERE 1=1"
        args: list[object] = []
        if recipe:
            q, args = q + " AND recipe = ?", [*args, recipe]
        if since:
            q, args = q + " AND created_at >= ?", [*args, since]
        if sweep:
            q, args = q + " AND sweep_id = ?", [*args, sweep]
        runs = [from_row(r) for r in self._conn.execute(q + " ORDER BY created_at, id", args)]
        # SQLite orders text after every number: a damaged created_at (read from the run id
        # where it can be) is filtered again; one unknown stays, with its problem, not hidden
        return [r for r in runs if not since or r.created_at is None or r.created_at >= since]

    def delete(self, run_id: str) -> None:
        """Remove one run with its epochs and events (the schema cascades): a launch its
        backend refused, or `runs rm`."""
        with self._write() as c:
            if c.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount == 0:
                raise self._unknown(run_id)

    def record_epochs(self, run_id: str, events: builtins.list[EpochMetrics]) -> None:
        """Upsert per-epoch metrics (a resumed run may report an epoch again)."""
        with self._write() as c:
            for e in events:
                c.execute(
                    "INSERT OR REPLACE INTO epochs VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        e.epoch,
                        e.samples_per_sec,
                        e.epoch_seconds,
                        e.train_acc,
                        e.val_acc,
                        e.model_dump_json(),
                    ),
                )

    def epochs(
        self, run_id: str, problems: builtins.list[str] | None = None
    ) -> builtins.list[EpochMetrics]:
        """The run's epoch metrics. With a ``problems`` list, an epoch row that does not decode
        (hand-damaged) is left out and named there; without one it raises."""
        rows = self._conn.execute(
            "SELECT epoch, metrics_json FROM epochs WHERE run_id = ? ORDER BY epoch", (run_id,)
        )
        out = []
        for epoch, text in rows:
            try:
                out.append(EpochMetrics.model_validate_json(text or ""))
            except ValueError as exc:
                if problems is None:
                    raise
                why = str(exc).splitlines()[0]
                problems.append(f"its metrics of epoch {epoch} are damaged ({why}); left out")
        return out

    def add_event(self, run_id: str, kind: str, message: str) -> None:
        with self._write() as c:
            self._event(c, run_id, kind, message)

    def events(self, run_id: str) -> builtins.list[tuple[float, str, str]]:
        rows = self._conn.execute(
            "SELECT time, kind, message FROM events WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return [tuple(r) for r in rows]

    @staticmethod
    def _event(c: sqlite3.Connection, run_id: str, kind: str, message: str) -> None:
        c.execute(
            "INSERT INTO events (run_id, time, kind, message) VALUES (?, ?, ?, ?)",
            (run_id, time.time(), kind, message),
        )

    def _unknown(self, run_id: str) -> DataError:
        ids = [r[0] for r in self._conn.execute("SELECT id FROM runs")]
        return DataError(
            f"no run {run_id!r} in the ledger {self.path}.{did_you_mean(run_id, ids)}",
            "list runs with `finetune runs list`.",
        )


def open_default(read_only_ok: bool = False) -> Ledger:
    """The ledger in the data directory (FINETUNE_DATA_DIR, or FINETUNE_LEDGER for a file);
    ``read_only_ok`` for commands that only read (see Ledger)."""
    return Ledger(default_path(LEDGER_FILE), read_only_ok)
