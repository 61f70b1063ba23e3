"""Launching, resuming, syncing and following runs: the library calls behind `launch` and
`runs`. Backends do the work; this module keeps the ledger true to what they report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from finetune.backends.base import Backend, Status
from finetune.errors import FinetuneError, UsageError
from finetune.metrics import EpochMetrics
from finetune.runs.ledger import ACTIVE, Ledger, Run, new_run_id


def runs_dir() -> Path:
    from finetune import settings

    return settings.get().data_dir / "runs"


def new_run(plan, backend_name: str, run_id: str, run_dir: Path) -> Run:
    """The ledger row for a new run of ``plan`` (not yet stored)."""
    from finetune.record import launch_record

    r = plan.resources
    return Run(
        id=run_id,
        created_at=time.time(),
        recipe=plan.recipe.name,
        dataset=plan.dataset.path,
        backend=backend_name,
        status="submitted",
        plan=plan.model_dump(mode="json"),
        instance_type=r.instance_type,
        instance_count=r.hosts,
        devices_per_host=r.devices_per_host,
        device_kind=r.device,
        spot=r.spot,
        run_dir=str(run_dir),
        record=launch_record(plan.dataset.manifest_sha256),
    )


def launch(plan, backend: Backend, ledger: Ledger, columns: dict | None = None) -> Run:
    """Record a new run, then submit it; a failed submit is recorded as failed. ``columns``
    are more Run fields to record with it from the start (a sweep's id and cell), so even a
    submit that fails is found again by them."""
    from dataclasses import replace

    run_id = new_run_id()
    run_dir = runs_dir() / run_id
    run_dir.mkdir(parents=True)
    run = ledger.create(replace(new_run(plan, backend.name, run_id, run_dir), **(columns or {})))
    return _submit(plan, backend, ledger, run)


def resume(run_id: str, backend: Backend, ledger: Ledger) -> Run:
    """Start a stopped, failed or interrupted run again from its last checkpoint."""
    from finetune.plan import Plan

    run = ledger.get(run_id)
    if run.status in ACTIVE and backend.status(run).state in ACTIVE:
        raise UsageError(f"run {run.id} is still {run.status}", "wait for it, or stop it first.")
    if run.status == "completed":
        raise UsageError(f"run {run.id} already completed", "launch a new run instead.")
    plan = Plan.model_validate(run.plan)
    ledger.add_event(run.id, "resume", f"resumed after status {run.status}")
    ledger.update(run.id, status="submitted", exit_reason=None, ended_at=None)
    return _submit(plan, backend, ledger, ledger.get(run.id))


def _submit(plan, backend: Backend, ledger: Ledger, run: Run) -> Run:
    try:
        ref = backend.submit(plan, run)
    except FinetuneError as exc:
        ledger.update(run.id, status="failed", exit_reason=str(exc), ended_at=time.time())
        raise
    started = run.started_at or time.time()
    return ledger.update(run.id, backend_ref=ref, started_at=started)


def sync(run: Run, backend: Backend, ledger: Ledger) -> tuple[Run, Status, list[EpochMetrics]]:
    """Ask the backend where the run is and write what changed into the ledger."""
    status = backend.status(run)
    epochs = backend.metrics(run)
    if epochs:
        ledger.record_epochs(run.id, epochs)
    changes: dict = {}
    if status.state != run.status:
        changes["status"] = status.state
    if status.final and run.ended_at is None:
        changes["ended_at"] = status.ended_at or time.time()
    if status.reason and status.reason != run.exit_reason:
        changes["exit_reason"] = status.reason
    columns, extra = _facts(run, status)
    changes.update(columns)
    if extra and status.final and changes.get("status"):  # once, when the run ends
        ledger.add_event(run.id, "final", json.dumps(extra, sort_keys=True, default=str))
    if changes:
        run = ledger.update(run.id, **changes)
    return run, status, epochs


# Ledger columns a backend may report in Status.facts (what the cloud measured, the money).
FACT_COLUMNS = (
    "training_seconds",
    "billable_seconds",
    "interrupted_seconds",
    "instance_count",
    "region",
    "charges",
)


def _facts(run: Run, status: Status) -> tuple[dict, dict]:
    """(changed ledger columns, other facts such as final metrics) from ``status.facts``."""
    facts = status.facts or {}
    columns = {
        k: v
        for k, v in facts.items()
        if k in FACT_COLUMNS and v is not None and getattr(run, k, None) != v
    }
    extra = {k: v for k, v in facts.items() if k not in FACT_COLUMNS and v is not None}
    return columns, extra


Update = Callable[[Run, Status, list[EpochMetrics], str], None]


@dataclass
class Follow:
    poll_seconds: float = 1.0
    timeout_seconds: float | None = None


def follow(run: Run, backend: Backend, ledger: Ledger, on_update: Update, opts=Follow()) -> Run:
    """Sync until the run ends, calling ``on_update(run, status, epochs, new_log_text)``."""
    offset = 0
    deadline = time.time() + opts.timeout_seconds if opts.timeout_seconds else None
    while True:
        run, status, epochs = sync(run, backend, ledger)
        text, offset = backend.logs(run, offset)
        on_update(run, status, epochs, text)
        if status.final:
            return run
        if deadline and time.time() > deadline:
            return run
        time.sleep(opts.poll_seconds)
