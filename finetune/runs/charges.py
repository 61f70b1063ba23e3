"""A ledger run's money: the charges its backend reported, the ECB rate of the day they ended,
and estimate.money.euros over both -- the one path `runs show` and `cost-report` share.

Runs recorded since ledger schema 4 carry their charges. Older runs are read from what older
versions stored: EC2's per-attempt cost record, SageMaker's cost record, or else the billable
(or wall) seconds at the price estimated at launch, or the catalog's price.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime

from finetune.catalog import fx, prices
from finetune.errors import DataError, FinetuneError
from finetune.estimate import money
from finetune.estimate.planned import Estimate
from finetune.runs.run import Run


def run_money(run: Run) -> money.Money:
    """What ``run`` cost: its charges billed by estimate.money at the rate of the day they ended."""
    charges = charges_of(run)
    try:
        rate = rate_for(_end_day(run, charges))
    except DataError:
        if any(c.rule != money.FREE for c in charges):
            raise  # a priced run needs the rate of its day (`finetune prices refresh`)
        rate = rate_for(date.max)  # nothing to convert: any dated rate will do
    return money.euros(charges, rate)


# What a hand-damaged record (a wrong type where a number belongs) raises past our checks.
DAMAGED = (ValueError, TypeError, KeyError, AttributeError, OverflowError)


def money_or_problem(run: Run) -> tuple[money.Money | None, str | None]:
    """(run_money(run), None), or (None, why it cannot be costed): a reader of the whole
    ledger shows the problem on that row and goes on with the others."""
    try:
        return run_money(run), None
    except FinetuneError as exc:
        return None, f"cannot be costed: {exc.what}"
    except DAMAGED as exc:
        return None, f"cannot be costed: its record is damaged ({type(exc).__name__}: {exc})"


def rate_for(day: date):
    """The ECB rate that applies on ``day`` (the latest published on or before it)."""
    return fx.eur_rate(on=day)


def charges_of(run: Run) -> list[money.Charge]:
    """The run's charges: as recorded, else reconstructed from an older record."""
    if run.charges:
        return [money.Charge.from_dict(c) for c in run.charges]
    if not run.instance_type:
        return []  # this machine: nothing billed
    if run.cost.get("attempts"):
        return [_legacy_attempt(a) for a in run.cost["attempts"]]
    if run.cost.get("usd_per_hour") is not None and run.cost.get("billable_seconds") is not None:
        return [_legacy_job(run)]
    return [_legacy_estimate(run)]


def _end_day(run: Run, charges: list[money.Charge]) -> date:
    ends = [c.ended_at for c in charges if c.ended_at is not None]
    when = max(ends) if ends else run.ended_at or time.time()
    return datetime.fromtimestamp(when, UTC).date()


def _legacy_attempt(a: dict) -> money.Charge:
    """An EC2 attempt as finetune before schema 4 recorded it (it did not record who ended a
    spot attempt, so it is billed as one the user ended: the seconds used)."""
    return money.Charge(
        rule=money.EC2,
        instance_type=a.get("instance_type", "?"),
        instances=int(a.get("hosts") or 1),
        seconds=float(a.get("running_seconds") or 0.0),
        usd_per_hour=a.get("usd_per_hour"),
        price_source=a.get("price_source") or "",
        market=a.get("market", "on-demand"),
        label=f"attempt {a.get('attempt', '?')} ({a.get('instance_id', '?')})",
    )


def _legacy_job(run: Run) -> money.Charge:
    """A SageMaker job's cost record from before schema 4."""
    c = run.cost
    return money.Charge(
        rule=money.SAGEMAKER,
        instance_type=c.get("instance_type") or run.instance_type or "?",
        instances=int(c.get("instance_count") or run.hosts),  # the record's own key
        seconds=float(c["billable_seconds"]),
        usd_per_hour=float(c["usd_per_hour"]),
        price_source=c.get("price_source", ""),
        price_as_of=c.get("price_as_of"),
        market="spot" if run.spot else "on-demand",
        training_seconds=run.training_seconds,
    )


def _legacy_estimate(run: Run) -> money.Charge:
    """A cloud run without a cost record: its billable seconds (else wall time) per instance,
    at the price recorded in its plan at launch, else the catalog's on-demand price."""
    rule = run.backend if run.backend in prices.BACKENDS else money.SAGEMAKER
    est = Estimate.model_validate(run.plan.get("estimate") or {})  # the plan as stored
    usd: float | None
    if est.hourly_usd is not None:
        usd, source, as_of = est.hourly_usd, est.price_source or "", est.price_as_of
    else:
        usd, source, as_of = _catalog_price(run, rule)
    seconds, note = run.billable_seconds, ""
    if seconds is None and run.started_at is not None:  # wall time: our clock and AWS's
        end = run.ended_at if run.ended_at is not None else time.time()
        seconds, note = money.elapsed(run.started_at, end, f"run {run.id}")
    return money.Charge(
        rule=rule,
        instance_type=run.instance_type or "?",
        instances=run.hosts,
        seconds=float(seconds or 0.0),
        usd_per_hour=usd,
        price_source=source,
        price_as_of=as_of,
        market="spot" if run.spot else "on-demand",
        ended_at=run.ended_at,
        training_seconds=run.training_seconds,
        note=note,
    )


def _catalog_price(run: Run, rule: str) -> tuple[float | None, str, str | None]:
    if not run.instance_type:
        return None, "no price: the run records no instance type", None
    try:
        p = prices.price(run.instance_type, run.region or "us-east-1", rule)
    except FinetuneError as exc:
        return None, f"no price: {exc.what}", None
    return p.usd_per_hour, f"{p.source} (catalog; none was recorded)", p.as_of_iso
