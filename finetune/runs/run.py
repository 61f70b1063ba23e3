"""A run as the ledger holds it: the Run row (with its plan decoded), the run states, new
run ids, and how a Run maps onto the ledger's columns (JSON columns encoded, a damaged one
read as empty and named in ``problems``)."""

from __future__ import annotations

import json
import math
import re
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
    created_at: float | None  # None only for a damaged row whose id gives no time either
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
    damaged: list = field(default_factory=list, compare=False)  # its columns read as damaged

    @property
    def gpus(self) -> int:
        return self.hosts * self.devices_per_host

    @property
    def wall_seconds(self) -> float | None:
        """Seconds from start to end (or now); never negative: an end a little before the
        start is another clock's skew (see durations.elapsed, which says so)."""
        if self.started_at is None or (self.ended_at is None and self.status in FINAL):
            return None  # (an ended run without its end: a damaged row, said in its problems)
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
_NOT_COLUMNS = {"problems", "damaged"}
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
    """The row as a Run; a damaged column (a hand edit, a damaged page: a JSON column that
    does not decode, a time beyond any date, text where a number belongs) is read as empty
    or unknown, named in ``problems`` and ``damaged``: one bad row must not hide the others."""
    d = dict(row)
    for attr, col in RENAMED_COLUMNS.items():
        d[attr] = d.pop(col)
    json_problems = decode_json_columns(d, JSON_COLUMNS)
    problems, damaged = list(json_problems.values()), list(json_problems)
    for part in _PLAN_PARTS:  # readers take each part of the plan for a mapping
        value = d["plan"].get(part, {})
        if not isinstance(value, dict) and not (part == "estimate" and value is None):
            problems.append(f"its plan_json column is damaged ({part} is not a mapping; read "
                            "as empty)")  # fmt: skip
            d["plan"][part] = {}
            damaged.append("plan_json")
    for attr, value in list(d.items()):
        d[attr], why = _checked(attr, value)
        if why is not None:
            recovered = id_time(str(d["id"])) if attr == "created_at" else None
            if recovered is not None:
                d[attr] = recovered
                when = datetime.fromtimestamp(recovered, UTC).isoformat()
                why += f"; read from its run id: {when}"
            else:
                why += "; read as unknown" if d[attr] in (None, "") else f"; read as {d[attr]!r}"
            col = RENAMED_COLUMNS.get(attr, attr)
            problems.append(f"its {col} column is damaged ({why})")
            damaged.append(col)
    d["spot"] = bool(d["spot"])
    return Run(**d, problems=problems, damaged=list(dict.fromkeys(damaged)))


# The times a date can show: from 1970 to the end of the year 9999 (datetime's last year); a
# ledger time outside them was not written by finetune, whose clock reads time.time().
LATEST_TIME = 253402300799.0
_TIMES = ("created_at", "updated_at", "started_at", "ended_at")
_AMOUNTS = ("training_seconds", "billable_seconds", "interrupted_seconds", "cost_eur")
_COUNTS = ("hosts", "devices_per_host")
_TEXTS = ("id", "recipe", "dataset", "backend", "status", "device_kind", "instance_type",
          "region", "exit_reason", "run_dir", "backend_ref", "sweep_id", "sweep_cell")  # fmt: skip
_PLAN_PARTS = ("hyperparameters", "derived", "estimate", "dataset")
_NOT_NULL = ("recipe", "dataset", "backend", "status", "device_kind")


def _checked(attr: str, value: object) -> tuple[object, str | None]:
    """(value, None) when ``value`` fits the column ``attr``; else (what to read, why not)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    finite = number and math.isfinite(value)  # type: ignore[arg-type]
    if attr in _TIMES:
        if value is None or (finite and 0 <= value <= LATEST_TIME):  # type: ignore[operator]
            return value, None
        return (0.0 if attr == "updated_at" else None), f"{_shown(value)}, not a time"
    if attr in _AMOUNTS:
        if value is None or (finite and value >= 0):  # type: ignore[operator]
            return value, None
        return None, f"{_shown(value)}, not a number of seconds or euros"
    if attr in _COUNTS:
        if isinstance(value, int) and value >= 1:
            return value, None
        return 1, f"{_shown(value)}, not a count"
    if attr == "spot":
        return (value, None) if value in (0, 1) else (0, f"{_shown(value)}, not 0 or 1")
    if attr in _TEXTS and not (isinstance(value, str) or (value is None and attr not in _NOT_NULL)):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        return text, f"{_shown(value)}, not text"
    return value, None


def _shown(value: object) -> str:
    """A damaged value in a few inert characters (repr escapes control characters)."""
    if isinstance(value, bytes):
        return f"a blob of {len(value)} bytes"
    return repr(value if not isinstance(value, str) else value[:40])


def id_time(run_id: str) -> float | None:
    """The creation time a run id carries ('ft-20261122-101500-a3f9', new_run_id), or None."""
    m = re.fullmatch(r"ft-(\d{8}-\d{6})-[0-9a-f]+", run_id)
    if m is None:
        return None
    try:
        return datetime.strptime(m[1], "%Y%m%d-%H%M%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
