"""Stage 4 of an estimate: the price of the instances (on-demand, or a spot quote) and what
the run's seconds cost, billed by money.euros -- the function finished runs are costed with --
at a dated EUR rate, as a band."""

from __future__ import annotations

from dataclasses import dataclass, replace

from finetune.catalog import fx, prices, spot
from finetune.errors import DataError
from finetune.estimate import money
from finetune.estimate.duration import Duration
from finetune.estimate.resolve import Resolved

Quote = prices.Price | spot.SpotPrice  # the price a charge is planned at (spot: its estimate)


@dataclass(frozen=True)
class Bill:
    """The planned charge and its euros: per hour always, for the run when its time is known."""

    price: prices.Price
    quote: Quote
    charge: money.Charge  # seconds 0: the rate card the run is billed by
    rate: fx.Rate
    eur_per_hour: float | None
    point: money.Money | None = None
    cheapest: money.Money | None = None  # at the duration's fastest
    dearest: money.Money | None = None  # at its slowest


def bill(
    resolved: Resolved,
    duration: Duration | None,
    rate: fx.Rate | None = None,
    spot_quote: spot.SpotPrice | None = None,
) -> Bill:
    """The price of ``resolved``'s instances (the catalog's DataError for a region without
    one) and, with a ``duration``, its euros at each of the duration's seconds."""
    request = resolved.request
    price = prices.price(resolved.instance.name, request.region, request.price_book)
    rate = rate or fx.eur_rate()
    quote: Quote = (spot_quote or spot.estimated(price)) if request.spot else price
    charge = money.Charge(
        rule=request.price_book,  # the price book's service: ec2 | sagemaker, its billing rule
        instance_type=price.display_name,
        instances=request.hosts,
        seconds=0,
        usd_per_hour=quote.usd_per_hour,
        price_source=quote.source,
        price_as_of=quote.as_of_iso,
        market="spot" if request.spot else "on-demand",
    )
    out = Bill(price, quote, charge, rate, money.eur_per_hour(charge, rate))
    if duration is None:
        return out
    point, fast, slow = (
        _euros(charge, s, rate) for s in (duration.seconds, duration.fastest, duration.slowest)
    )
    return replace(out, point=point, cheapest=fast, dearest=slow)


def _euros(charge: money.Charge, seconds: int, rate: fx.Rate) -> money.Money:
    m = money.euros([replace(charge, seconds=seconds)], rate, estimate=True)
    if m.eur is None:  # the planned charge carries the quote's price, so this is a bug
        raise DataError(f"the planned charge for {charge.instance_type} has no price",
                        "report this: an estimate is made from a quoted price.")  # fmt: skip
    return m
