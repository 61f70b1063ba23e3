"""Syncing, following, listing and stopping runs: the ledger kept true to what the backends
report. Only these calls ask a backend where a run is; a plain listing asks only backends
whose status needs no network (Capabilities.offline_status). service/ is the one ledger
writer: a backend's events and facts come back in its Status (or, at submit, its Journal)
and are written here."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from finetune.backends import backend_class, get_backend
from finetune.backends.base import Backend, Event, Feature, Journal, Status
from finetune.contracts.metrics import EpochMetrics
from finetune.errors import FinetuneError
from finetune.runs.charges import DAMAGED
from finetune.runs.ledger import Ledger
from finetune.runs.run import ACTIVE, Run
from finetune.runs.spend import done_share, over_budget, spend
from finetune.service.logtext import read_logs, remote


def sync(run: Run, backend: Backend, ledger: Ledger) -> tuple[Run, Status, list[EpochMetrics]]:
    """Ask the backend where the run is and write what changed into the ledger."""
    status = backend.status(run)
    epochs = backend.metrics(run)
    if epochs:
        ledger.record_epochs(run.id, epochs)
    keep_events(ledger, run, status)
    changes: dict = {}
    if status.state != run.status:
        changes["status"] = status.state
    if status.final and run.ended_at is None:
        changes["ended_at"] = status.ended_at or time.time()
    reason = remote(status.reason)  # status.json or FailureReason: whoever wrote them
    if reason and reason != run.exit_reason:
        changes["exit_reason"] = reason
    columns, extra = _facts(run, status)
    changes.update(columns)
    if extra and status.final and changes.get("status"):  # once, when the run ends
        ledger.add_event(run.id, "final", json.dumps(extra, sort_keys=True, default=str))
    if changes:
        run = ledger.update(run.id, **changes)
    return run, status, epochs


def keep(ledger: Ledger, run: Run, status: Status) -> Run:
    """Write what a status carries besides its state (events, changed fact columns): for a
    status asked outside `sync` (resume, stop), so nothing a backend reported is lost."""
    keep_events(ledger, run, status)
    columns, _ = _facts(run, status)
    return ledger.update(run.id, **columns) if columns else run


def keep_events(ledger: Ledger, run: Run, status: Status) -> None:
    for event in status.events:
        ledger.add_event(run.id, event.kind, remote(event.message))


def journal(ledger: Ledger, run_id: str) -> Journal:
    """A journal that writes each of a backend's notes into the ledger as it comes."""

    def write(event: Event | None, columns: dict) -> None:
        if event is not None:
            ledger.add_event(run_id, event.kind, event.message)
        if columns:
            ledger.update(run_id, **columns)

    return Journal(write)


# Ledger columns a backend may report in Status.facts (what the cloud measured, the money,
# and a new backend reference or plan after a relaunch).
FACT_COLUMNS = (
    "backend_ref",
    "plan",
    "training_seconds",
    "billable_seconds",
    "interrupted_seconds",
    "hosts",
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
    poll_seconds: float | None = None  # None: as often as the backend says (poll_seconds)
    timeout_seconds: float | None = None
    wait: Callable[[float], None] | None = None  # between two polls (None: time.sleep)


def follow(run: Run, backend: Backend, ledger: Ledger, on_update: Update, opts=Follow()) -> Run:
    """Sync until the run ends, calling ``on_update(run, status, epochs, new_log_text)``."""
    offset = 0
    every = backend.poll_seconds if opts.poll_seconds is None else opts.poll_seconds
    deadline = time.time() + opts.timeout_seconds if opts.timeout_seconds else None
    while True:
        run, status, epochs = sync(run, backend, ledger)
        text, offset = read_logs(run, backend, offset)  # escape sequences stripped
        on_update(run, status, epochs, text)
        if status.final:
            return run
        run = guard_budget(run, backend, ledger, epochs)
        if deadline and time.time() > deadline:
            return run
        (opts.wait or time.sleep)(every)


def guard_budget(
    run: Run, backend: Backend, ledger: Ledger, epochs: list, now: float | None = None
) -> Run:
    """Stop a run with a checkpoint once its projected total (runs.spend, from the epochs
    done) would pass the plan's --max-eur; the ledger says why. Before the first epoch there
    is no progress to project from: the backend's own budget runtime holds until then."""
    cap = (run.plan or {}).get("max_eur")
    if cap is None or not epochs or run.status not in ("submitted", "running"):
        return run
    if not backend.capabilities.supports(Feature.STOP):
        return run
    total = int(run.plan["hyperparameters"]["epochs"])
    why = over_budget(spend(run, now, done=done_share(len(epochs), total)), cap)
    if why is None:
        return run
    backend.stop(run)
    ledger.add_event(run.id, "budget", why)
    return ledger.update(run.id, status="stopping", exit_reason=why)


def refreshed(ledger: Ledger, run_id: str) -> Run:
    """The run, synced with its backend if it may still be moving (`runs show`)."""
    run = ledger.get(run_id)
    if run.status in ACTIVE and not getattr(ledger, "read_only", False):
        # (a ledger opened read-only, on a disk that cannot be written, is shown as it is)
        run, _, _ = sync(run, get_backend(run.backend), ledger)
    return run


def listing(ledger: Ledger, recipe: str | None = None, refresh: bool = False) -> list[Run]:
    """Runs, oldest first. Live runs are synced where that needs no network, all of them
    with ``refresh`` (`runs list --refresh`): a listing works with the cloud unreachable."""
    runs = []
    for run in ledger.list(recipe=recipe):
        if run.status in ACTIVE:
            try:
                run = _listed(ledger, run, refresh)
            except (FinetuneError, OSError, *DAMAGED) as exc:
                if refresh and isinstance(exc, FinetuneError):
                    raise  # asked to ask the cloud: say why it could not
                # a listing from the ledger: one run's backend (unknown to this version, its
                # files damaged or unreadable) must not hide the others
                why = getattr(exc, "what", None) or f"{type(exc).__name__}: {exc}"
                run.problems.append(f"its backend could not say where it is: {why}")
        runs.append(run)
    return runs


def _listed(ledger: Ledger, run: Run, refresh: bool) -> Run:
    if refresh or backend_class(run.backend).capabilities.offline_status:
        return refreshed(ledger, run.id)
    return run


def stop(ledger: Ledger, run_id: str) -> Run:
    """Ask the run's backend to stop it, then record where it is now ("stopping", or already
    ended when the backend says so)."""
    run = ledger.get(run_id)
    backend = get_backend(run.backend)
    backend.capabilities.check(backend.name, {Feature.STOP})
    backend.stop(run)
    status = backend.status(run)
    run = keep(ledger, run, status)
    if status.final:  # nothing was left running: record how it ended
        return sync(run, backend, ledger)[0]
    return ledger.update(run.id, status="stopping")
