"""A run as the ledger holds it: the Run row (with its plan decoded), the run states, new
run ids, and how a Run maps onto the ledger's columns (JSON columns encoded, a damaged one
read as empty and named in ``problems``)."""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime

from finetune.runs.storage import decode_json_columns

ACTIVE = ("submitted", "running", "stopping")
FINAL = ("completed", "failed", "stopped", "interrupted")


@dataclass
class Run:
    """One row of ``runs``, with the plan decoded."""

    id: str
    created_at: float
    recipe: str
    dataset: str
    backend: str
    status: str
    plan: dict
    instance_type: str | None = None
    hosts: int = 1  # instances (machines) of the run; column instance_count, see RENAMED_COLUMNS
    devices_per_host: int = 1
    device_kind: str = "cpu"
    spot: bool = False
    region: str | None = None
    exit_reason: str | None = None
    run_dir: str | None = None
    backend_ref: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    training_seconds: float | None = None
    billable_seconds: float | None = None
    interrupted_seconds: float | None = None
    cost_eur: float | None = None  # written by finetune before ledger schema 4; never read
    cost: dict = field(default_factory=dict)  # the same: older cost records (runs/charges.py)
    charges: list = field(default_factory=list)  # estimate.money.Charge dicts from the backend
    record: dict = field(default_factory=dict)  # finetune.contracts.record.launch_record()
    sweep_id: str | None = None  # the `finetune sweep` that launched it (schema 5)
    sweep_cell: str | None = None  # its cell's identity in that sweep
    sweep: dict = field(default_factory=dict)  # the cell's grid values
    updated_at: float = 0.0
    # not a column: what could not be decoded from the row (a hand-damaged JSON column); the
    # row is still listed, with its problems, rather than hiding the rest of the ledger
    problems: list = field(default_factory=list, compare=False)

    @property
    def gpus(self) -> int:
        return self.hosts * self.devices_per_host

    @property
    def wall_seconds(self) -> float | None:
        """Seconds from start to end (or now); never negative: an end a little before the
        start is another clock's skew (see durations.elapsed, which says so)."""
        if self.started_at is None:
            return None
        return max(0.0, (self.ended_at or time.time()) - self.started_at)


def new_run_id(now: float | None = None) -> str:
    """'ft-20261122-101500-a3f9': sortable, and valid as a SageMaker job name."""
    stamp = datetime.fromtimestamp(now or time.time(), UTC).strftime("%Y%m%d-%H%M%S")
    return f"ft-{stamp}-{secrets.token_hex(2)}"


JSON_COLUMNS = {
    "plan": "plan_json",
    "cost": "cost_json",
    "record": "record_json",
    "charges": "charges_json",
    "sweep": "sweep_json",
}
# Attributes named anew (hosts are hosts) over the column they had: the column keeps
# its name, so ledgers written by older versions read as they are and older versions still
# read this one (a smaller change than a schema migration renaming the column).
RENAMED_COLUMNS = {"hosts": "instance_count"}
_NOT_COLUMNS = {"problems"}
COLUMNS = {
    RENAMED_COLUMNS.get(f.name, f.name)
    for f in fields(Run)
    if f.name not in JSON_COLUMNS.keys() | _NOT_COLUMNS
} | set(JSON_COLUMNS.values())


def column_values(values: dict) -> dict:
    """Run attributes -> the ledger's columns: JSON columns encoded, renamed ones renamed."""
    out = dict(values)
    for attr, col in JSON_COLUMNS.items():
        if attr in out:
            out[col] = json.dumps(out.pop(attr))
    for attr, col in RENAMED_COLUMNS.items():
        if attr in out:
            out[col] = out.pop(attr)
    return out


def to_row(run: Run) -> dict:
    """The run as the ledger's columns: JSON columns encoded, ``spot`` as 0/1."""
    out = column_values({k: v for k, v in run.__dict__.items() if k not in _NOT_COLUMNS})
    out["spot"] = int(run.spot)
    return out


def from_row(row: sqlite3.Row) -> Run:
    """The row as a Run; a damaged JSON column is read as empty and named in ``problems``."""
    d = dict(row)
    for attr, col in RENAMED_COLUMNS.items():
        d[attr] = d.pop(col)
    problems = decode_json_columns(d, JSON_COLUMNS)
    d["spot"] = bool(d["spot"])
    return Run(**d, problems=problems)
