"""The money of an EC2 run: each attempt's running seconds (per-second billing with EC2's
60-second minimum) times its hourly price, in euros; interrupted attempts' time kept apart.

The hourly price is fixed at launch: the current spot price (DescribeSpotPriceHistory) for a
spot attempt, the catalog's on-demand price otherwise. The formulas live in report/cost.py.
"""

from __future__ import annotations

import time

from finetune.backends.ec2.state import AttemptRecord, Ec2State
from finetune.errors import FinetuneError, UsageError


def hourly_price(instance_type: str, region: str, spot: bool, ec2=None) -> tuple[float | None, str]:
    """(USD per hour, source); (None, why) when no price is known."""
    try:
        from finetune.catalog import prices
        from finetune.catalog import spot as spot_prices
    except ImportError as exc:  # catalog not installed in this build
        return None, f"no price catalog ({exc})"
    try:
        if spot:
            found = spot_prices.current([instance_type], region, ec2)
            if instance_type in found:
                return found[instance_type].usd_per_hour, found[instance_type].source
        price = prices.price(instance_type, region, "ec2")
        if spot:
            est = spot_prices.estimated(price)
            return est.usd_per_hour, est.source
        return price.usd_per_hour, f"{price.source}, {price.as_of.isoformat()}"
    except FinetuneError as exc:
        return None, f"no price: {exc.what}"


def running_seconds(a: AttemptRecord, now: float | None = None) -> float:
    end = a.ended_at if a.ended_at is not None else (now or time.time())
    return max(end - a.launched_at, 0.0)


def ledger_fields(state: Ec2State, now: float | None = None) -> dict:
    """billable_seconds, interrupted_seconds, cost_eur and the cost breakdown, for the ledger."""
    from finetune.report.cost import cost_eur, ec2_billable_seconds

    rate = _eur_rate()
    billable = interrupted = 0.0
    eur: float | None = 0.0
    rows = []
    for a in state.attempts:
        secs = running_seconds(a, now)
        billed = ec2_billable_seconds(secs)
        hosts = len(a.hosts)  # every host bills the same seconds
        billable += billed * hosts
        if a.outcome == "interrupted":
            interrupted += secs * hosts
        euros = None
        if a.usd_per_hour is not None and rate is not None:
            euros = cost_eur(billed, hosts, a.usd_per_hour, rate.usd_per_eur)
        eur = None if euros is None or eur is None else eur + euros
        rows.append(
            dict(
                attempt=a.n,
                instance_id=a.instance_id,
                instance_type=a.instance_type,
                hosts=hosts,
                market="spot" if a.spot else "on-demand",
                running_seconds=round(secs, 1),
                billable_seconds=billed,
                usd_per_hour=a.usd_per_hour,
                price_source=a.price_source,
                eur=euros,
                outcome=a.outcome,
            )
        )
    cost = dict(attempts=rows, rate=rate.describe() if rate else None, billing="EC2 per second")
    return dict(
        billable_seconds=billable,
        interrupted_seconds=interrupted,
        cost_eur=eur,
        cost=cost,
    )


def eur_spent(state: Ec2State, now: float | None = None) -> float | None:
    return ledger_fields(state, now)["cost_eur"]


def eur_per_hour(usd_per_hour: float | None) -> float | None:
    rate = _eur_rate()
    return usd_per_hour / rate.usd_per_eur if usd_per_hour and rate else None


def _eur_rate():
    try:
        from finetune.catalog import fx

        return fx.eur_rate()
    except (ImportError, FinetuneError):
        return None


def runtime_cap(state: Ec2State, usd_per_hour: float | None) -> int:
    """--max-runtime, shortened so that --max-eur cannot be exceeded: the user data's dead-man
    switch then ends the instance before the money runs out."""
    opts = state.options
    cap = opts.max_runtime_s
    eph = eur_per_hour(usd_per_hour)
    if opts.max_eur is not None and eph:
        left = opts.max_eur - (eur_spent(state) or 0.0)
        cap = min(cap, int(left / eph * 3600))
        if cap < 600:
            raise UsageError(
                f"--max-eur {opts.max_eur:g} leaves {max(left, 0):.2f} EUR: under 10 minutes "
                f"at {eph:.2f} EUR/h",
                "raise --max-eur or pick a cheaper instance.",
            )
    return int(cap)
