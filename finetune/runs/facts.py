"""Ledger runs as the report's RunFacts, their money from runs.charges (the same path
`runs show` takes), so a run costs the same wherever it is shown.

Local runs cost nothing: they are reported with no charges and their device count, so their
throughput still counts for scaling.
"""

from __future__ import annotations

from datetime import datetime, timezone

from finetune.metrics import EpochMetrics
from finetune.report.model import RunFacts
from finetune.runs.charges import run_money
from finetune.runs.ledger import Run


def run_facts(run: Run, epochs: list[EpochMetrics]) -> RunFacts:
    """The report's view of one run from the ledger."""
    local = not run.instance_type
    return RunFacts(
        run_id=run.id,
        recipe=run.recipe,
        dataset=run.plan.get("dataset", {}).get("name", run.dataset),
        model=run.plan.get("hyperparameters", {}).get("model", "?"),
        backend=run.backend,
        instance_type=f"local-{run.device_kind}" if local else run.instance_type,
        instance_count=run.instance_count,
        gpus_per_instance=run.devices_per_host,
        spot=run.spot,
        region=run.region or ("local" if local else "?"),
        started_at=datetime.fromtimestamp(run.started_at or run.created_at, timezone.utc),
        wall_seconds=run.wall_seconds or 0.0,
        steady_images_per_sec=None,
        epochs=tuple(epochs),
        money=run_money(run),
        gpu_model=f"{run.device_kind.upper()}" if local else "",
    )


def finished_facts(ledger, run_ids=(), recipe=None, since=None) -> list[RunFacts]:
    """RunFacts of the runs asked for (or all ended runs matching the filters)."""
    if run_ids:
        runs = [ledger.get(r) for r in run_ids]
    else:
        runs = [r for r in ledger.list(recipe=recipe, since=since) if r.ended_at is not None]
    return [run_facts(r, ledger.epochs(r.id)) for r in runs]


def measured_history() -> list:
    """The ledger's finished runs with throughput, as report.estimate history (estimates learn
    from what was measured here). An unreadable ledger is no history, never a failed plan."""
    from finetune.errors import FinetuneError
    from finetune.report.estimate import measurements
    from finetune.runs.ledger import open_default

    try:
        with open_default() as ledger:
            runs = [r for r in ledger.list() if r.status == "completed"]
            return measurements(_facts_or_skip(ledger, runs))
    except FinetuneError:
        return []


def _facts_or_skip(ledger, runs) -> list[RunFacts]:
    from finetune.errors import FinetuneError

    out = []
    for r in runs:
        try:
            out.append(run_facts(r, ledger.epochs(r.id)))
        except FinetuneError:
            continue  # a run that cannot be costed can still not teach throughput: skip it
    return out
