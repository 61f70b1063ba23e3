"""Ledger runs as the report's RunFacts: the price known at launch, else the catalog's.

A cloud run's plan carries the estimate made at launch (hourly USD, its as-of date and
source, the EUR rate and its date); the report uses those, so a later price change does not
rewrite history. Local runs cost nothing: they are reported with a zero price and their
device count, so their throughput still counts for scaling.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

from finetune.metrics import EpochMetrics
from finetune.report.model import RunFacts
from finetune.runs.ledger import Run

LOCAL_SOURCE = "this machine (no charge)"


def _price(run: Run) -> tuple[float, date, str, float, date]:
    """(hourly USD per instance, as of, source, USD per EUR, rate date) for ``run``."""
    from finetune.catalog import fx, prices, spot

    est = run.plan.get("estimate") or {}
    if est.get("hourly_usd") is not None and est.get("usd_per_eur"):
        return (
            float(est["hourly_usd"]),
            date.fromisoformat(est["price_as_of"]),
            est["price_source"],
            float(est["usd_per_eur"]),
            date.fromisoformat(est["rate_date"]),
        )
    when = datetime.fromtimestamp(run.created_at, timezone.utc).date()
    rate = fx.eur_rate(on=when)
    if run.backend == "local" or not run.instance_type:
        return 0.0, when, LOCAL_SOURCE, rate.usd_per_eur, rate.on
    p = prices.price(run.instance_type, run.region or "us-east-1", run.backend)
    hourly = spot.estimated(p).usd_per_hour if run.spot else p.usd_per_hour
    return hourly, p.as_of, p.source, rate.usd_per_eur, rate.on


def _billable(run: Run) -> float:
    if run.billable_seconds is not None:
        return run.billable_seconds
    wall = run.wall_seconds or 0.0
    if run.backend == "ec2":
        from finetune.report.cost import ec2_billable_seconds

        return float(ec2_billable_seconds(wall))
    return wall


def run_facts(run: Run, epochs: list[EpochMetrics]) -> RunFacts:
    """The report's view of one run from the ledger."""
    hourly, as_of, source, usd_per_eur, rate_date = _price(run)
    local = run.backend == "local" or not run.instance_type
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
        billable_seconds=_billable(run),
        steady_images_per_sec=None,
        epochs=tuple(epochs),
        hourly_usd=hourly,
        price_as_of=as_of,
        price_source=source,
        usd_per_eur=usd_per_eur,
        rate_date=rate_date,
        gpu_model=f"{run.device_kind.upper()}" if local else "",
        training_seconds=run.training_seconds,
    )


def finished_facts(ledger, run_ids=(), recipe=None, since=None) -> list[RunFacts]:
    """RunFacts of the runs asked for (or all ended runs matching the filters)."""
    if run_ids:
        runs = [ledger.get(r) for r in run_ids]
    else:
        runs = [r for r in ledger.list(recipe=recipe, since=since) if r.ended_at is not None]
    return [run_facts(r, ledger.epochs(r.id)) for r in runs]
