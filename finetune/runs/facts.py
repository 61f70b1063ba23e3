"""Ledger runs as the report's RunFacts, their money from runs.charges (the same path
`runs show` takes), so a run costs the same wherever it is shown.

Local runs cost nothing: they are reported with no charges and their device count, so their
throughput still counts for scaling.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from finetune.contracts.hparams import renamed
from finetune.contracts.metrics import EpochMetrics
from finetune.errors import DataError, FinetuneError
from finetune.estimate.money import elapsed
from finetune.estimate.run_history import Measurement
from finetune.report.runfacts import RunFacts
from finetune.runs.charges import DAMAGED, run_money
from finetune.runs.ledger import open_default
from finetune.runs.run import FINAL, Run


def clock_note(run: Run) -> str:
    """'clock skew of 0.011 s clamped ...' when the run ends a little before it starts (its end
    from AWS's clock, its start from ours), else ''; a DataError when it ends far before."""
    if run.started_at is None or run.ended_at is None:
        return ""
    return elapsed(run.started_at, run.ended_at, f"run {run.id}")[1]


def run_facts(run: Run, epochs: list[EpochMetrics]) -> RunFacts:
    """The report's view of one run from the ledger; DataError for a row that makes no sense
    (it ends far before it starts; a little before is clock skew, clamped)."""
    clock_note(run)
    began = run.started_at if run.started_at is not None else run.created_at
    if began is None:
        raise DataError(f"run {run.id} has no start or creation time", _REMOVE.format(run.id))
    local = not run.instance_type
    hp = renamed(run.plan.get("hyperparameters", {}))  # a run an older version recorded too
    return RunFacts(
        run_id=run.id,
        recipe=run.recipe,
        dataset=run.plan.get("dataset", {}).get("name", run.dataset),
        model=run.plan.get("hyperparameters", {}).get("model", "?"),
        backend=run.backend,
        instance_type=run.instance_type or f"local-{run.device_kind}",
        hosts=run.hosts,
        devices_per_host=run.devices_per_host,
        spot=run.spot,
        region=run.region or ("local" if local else "?"),
        started_at=datetime.fromtimestamp(began, UTC),
        wall_seconds=run.wall_seconds or 0.0,
        steady_images_per_sec=None,
        epochs=tuple(epochs),
        money=run_money(run),
        gpu_model=f"{run.device_kind.upper()}" if local else "",
        status=run.status,
        engine=hp.get("engine", ""),
        batch_per_device=hp.get("batch_per_device"),
        image_size=hp.get("image_size"),
        device_kind=run.device_kind,
        sweep_values=tuple(sorted((run.sweep or {}).items())),
    )


def finished_facts(
    ledger, run_ids=(), recipe=None, since=None, sweep=None, skipped: list | None = None
) -> list[RunFacts]:
    """RunFacts of the runs asked for (or all ended runs matching the filters). With a
    ``skipped`` list, a run that cannot be reported is skipped and its reason appended there
    (one bad row must not hide the rest); without one it raises."""
    if run_ids:
        runs = [ledger.get(r) for r in run_ids]
    else:
        found = ledger.list(recipe=recipe, since=since, sweep=sweep)
        # an ended run without its end time is a damaged row: said, never dropped unseen
        runs = [r for r in found if r.ended_at is not None or r.status in FINAL or r.damaged]
    out = []
    for r in runs:
        try:
            if r.ended_at is None:
                raise DataError(f"it is {r.status} but its end time is unknown", "")
            out.append(run_facts(r, ledger.epochs(r.id)))
            note = clock_note(r)
        except (FinetuneError, *DAMAGED) as exc:
            if skipped is None:
                raise
            why = getattr(exc, "what", None) or _damaged(exc)
            skipped += [f"{r.id}: skipped: {why}", *_damage_notes(r)]
            continue
        if skipped is not None:
            skipped += [f"{r.id}: {note}"] * bool(note) + _damage_notes(r)
    return out


_REMOVE = "if it is of no more use, remove it: `finetune runs rm {}`."


def _damage_notes(run: Run) -> list[str]:
    """A damaged row's problems, then what removes it (the report counts it, never hides it)."""
    if not run.damaged:
        return []
    return [f"{run.id}: {p}" for p in run.problems] + [f"{run.id}: {_REMOVE.format(run.id)}"]


def _damaged(exc: BaseException) -> str:
    return f"its record is damaged ({type(exc).__name__}: {exc})"


def measurements(runs: Iterable[RunFacts]) -> list[Measurement]:
    """Finished runs as throughput history for the estimate (estimate_run's ``history``);
    runs without metrics drop out."""
    return [
        Measurement(
            r.model,
            r.gpu_model,
            r.devices,
            r.images_per_sec,
            r.run_id,
            r.engine,
            r.batch_per_device,
            r.image_size,
        )
        for r in runs
        if r.images_per_sec
    ]


def measured_history() -> list:
    """The ledger's finished runs with throughput, as estimate.estimator history (estimates learn
    from what was measured here). An unreadable ledger is no history, never a failed plan."""
    try:
        with open_default(read_only_ok=True) as ledger:
            runs = [r for r in ledger.list() if r.status == "completed"]
            return measurements(_facts_or_skip(ledger, runs))
    except (FinetuneError, *DAMAGED):
        return []


def _facts_or_skip(ledger, runs) -> list[RunFacts]:
    out = []
    for r in runs:
        try:
            out.append(run_facts(r, ledger.epochs(r.id)))
        except (FinetuneError, *DAMAGED):
            continue  # a run that cannot be costed can still not teach throughput: skip it
    return out
