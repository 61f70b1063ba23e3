"""What an EC2 run was charged for, as facts: per attempt its instances, start and end, market,
the hourly USD price recorded at launch and where it came from, and whether EC2 itself
interrupted it. Never euros: estimate.money bills these (per second, 60 s minimum, AWS's rules
for interrupted spot instances) for `runs show`, `cost-report` and the --max-eur guards alike.

The price is fixed at launch, asked once per launch for every choice (`quotes`): for spot,
EC2's current spot price (DescribeSpotPriceHistory) in the zone the attempt landed in, else
the region's lowest zone price, else the catalog's estimate; for on-demand, the catalog's price.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from finetune.backends.ec2.state import AttemptRecord, Candidate, Ec2State
from finetune.catalog import fx, prices
from finetune.catalog import spot as spot_prices
from finetune.errors import FinetuneError, UsageError
from finetune.estimate import money
from finetune.runs.spend import budget_seconds


@dataclass(frozen=True)
class Quote:
    """An hourly USD price per instance and its provenance (None: no price known, and why)."""

    usd_per_hour: float | None
    source: str
    as_of: str | None = None


@dataclass(frozen=True)
class Quotes:
    """A launch's prices, asked once: each choice's hourly price before it lands (what the
    runtime cap is set from) and, for spot, every zone's (the one paid where it lands)."""

    region: str
    choices: dict[tuple[str, bool], Quote]  # (instance type, spot) -> price
    zones: dict[tuple[str, str], Quote] = field(default_factory=dict)  # (type, zone) -> spot

    def of(self, choice) -> Quote:
        """The price of ``choice`` (a state.Candidate) before it lands."""
        return self.choices[(choice.instance_type, choice.spot)]

    def covers(self, choices, region: str) -> bool:
        return region == self.region and all(
            (c.instance_type, c.spot) in self.choices for c in choices
        )

    def paid(self, choice, zone: str) -> Quote:
        """The price recorded for ``choice`` landed in ``zone``: that zone's spot price where
        EC2 gave one, else the choice's price."""
        zoned = self.zones.get((choice.instance_type, zone)) if choice.spot else None
        return zoned or self.of(choice)


def quotes(choices, region: str, ec2=None) -> Quotes:
    """Every choice (state.Candidate) priced with one question to EC2: the spot prices of
    every spot type in every zone (DescribeSpotPriceHistory; before landing, the region's
    lowest), else the catalog's spot estimate; the catalog's on-demand price otherwise."""
    keys = list(dict.fromkeys((c.instance_type, c.spot) for c in choices))
    spot_types = sorted({t for t, spot in keys if spot})
    zoned, failed = {}, None
    try:
        zoned = spot_prices.zone_prices(spot_types, region, ec2) if spot_types else {}
    except FinetuneError as exc:
        failed = exc
    zones = {k: _live(p) for k, p in zoned.items()}
    lowest = spot_prices.lowest(zoned)
    return Quotes(region, {k: _quote(*k, region, lowest, failed) for k in keys}, zones)


def hourly_price(instance_type: str, region: str, spot: bool, ec2=None) -> Quote:
    """The price to record for one instance type and market (see `quotes`)."""
    return quotes([Candidate(instance_type, spot)], region, ec2).choices[(instance_type, spot)]


def _live(s: spot_prices.SpotPrice) -> Quote:
    return Quote(s.usd_per_hour, f"{s.source}, at launch", s.as_of_iso)


def _quote(instance_type: str, spot: bool, region: str, lowest: dict, failed) -> Quote:
    try:
        if spot and failed is not None:
            raise failed
        if spot and instance_type in lowest:
            return _live(lowest[instance_type])
        price = prices.price(instance_type, region, "ec2")
        quote = spot_prices.estimated(price) if spot else price
        return Quote(quote.usd_per_hour, quote.source, quote.as_of_iso)
    except FinetuneError as exc:
        return Quote(None, f"no price: {exc.what}")


def running_seconds(a: AttemptRecord, now: float | None = None) -> float:
    end = a.ended_at if a.ended_at is not None else (now or time.time())
    return max(end - a.launched_at, 0.0)


def charge(a: AttemptRecord, now: float | None = None) -> money.Charge:
    """One attempt as a charge: every host ran (and is billed) as long as the attempt."""
    return money.Charge(
        rule=money.EC2,
        instance_type=a.instance_type,
        instances=len(a.hosts),
        seconds=round(running_seconds(a, now), 3),
        usd_per_hour=a.usd_per_hour,
        price_source=a.price_source,
        price_as_of=a.price_as_of,
        market="spot" if a.spot else "on-demand",
        interrupted_by_ec2=a.interrupted_by_ec2,
        started_at=a.launched_at,
        ended_at=a.ended_at,
        label=f"attempt {a.n} ({', '.join(a.hosts)}{', ' + a.outcome if a.outcome else ''})",
    )


def ledger_fields(state: Ec2State, now: float | None = None) -> dict:
    """The run's facts for the ledger: its charges and the time lost to interruptions."""
    interrupted = sum(
        running_seconds(a, now) * len(a.hosts) for a in state.attempts if a.outcome == "interrupted"
    )
    return dict(
        charges=[charge(a, now).to_dict() for a in state.attempts],
        interrupted_seconds=interrupted,
    )


def eur_spent(state: Ec2State, now: float | None = None) -> float | None:
    """Euros spent so far (estimate.money at today's rate); None when a price is unknown."""
    return money.euros([charge(a, now) for a in state.attempts], fx.eur_rate()).eur


def dearest(quotes: dict, count: int) -> money.Charge | None:
    """The dearest priced choice of ``quotes`` ({state.Candidate: Quote}) as a charge of
    ``count`` hosts (None: none has a price), so --max-eur holds whichever launches."""
    priced = [(q.usd_per_hour, c, q) for c, q in quotes.items() if q.usd_per_hour is not None]
    if not priced:
        return None
    usd, choice, quote = max(priced, key=lambda p: p[0])
    return money.Charge(
        rule=money.EC2,
        instance_type=choice.instance_type,
        instances=count,
        seconds=0,
        usd_per_hour=usd,
        price_source=quote.source,
        market="spot" if choice.spot else "on-demand",
    )


def runtime_cap(state: Ec2State, planned: money.Charge | None) -> int:
    """--max-runtime, shortened so that --max-eur cannot be exceeded by ``planned`` (the dearest
    choice, all its hosts): the user data's dead-man switch then ends the instances before the
    money runs out."""
    opts = state.options
    cap = opts.max_runtime
    if cap is None:  # preflight.with_runtime fills it before any launch or --dry-run
        raise ValueError("runtime_cap: --max-runtime was never filled in (with_runtime)")
    if opts.max_eur is None or planned is None:
        return int(cap)

    rate = fx.eur_rate()
    spent = eur_spent(state) or 0.0
    left = opts.max_eur - spent
    affordable = budget_seconds(opts.max_eur, spent, planned, rate)  # the one budget rule
    if affordable is None:
        return int(cap)
    cap = min(cap, affordable)
    if cap < 600:
        per_hour = money.eur_per_hour(planned, rate)
        raise UsageError(
            f"--max-eur {opts.max_eur:g} leaves {max(left, 0):.2f} EUR: under 10 minutes "
            f"at {per_hour:.2f} EUR/h",
            f"raise --max-eur to {_least(state, planned, rate):.2f} or more (10 minutes), "
            "or pick a cheaper instance.",
        )
    return int(cap)


def _least(state: Ec2State, planned: money.Charge, rate) -> float:
    """The smallest --max-eur that leaves 10 minutes of ``planned`` after what was spent."""
    return (eur_spent(state) or 0.0) + (money.smallest_cap(planned, rate, 600) or 0.0)
