"""The rows of `finetune prices`: instances with GPUs and their hourly price in euros, each
with where its price and rate came from and how old they are -- and the instances that have no
sourced price (retired P2, ml.* before a refresh), said so instead of left out silently."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from finetune.catalog import cache, fx, instances, prices, spot
from finetune.estimate import money
from finetune.settings.names import check_region


@dataclass(frozen=True)
class Offer:
    """One instance type in one region on one backend, on-demand and spot, in EUR per hour."""

    instance: instances.InstanceType
    price: prices.Price
    spot: spot.SpotPrice
    rate: fx.Rate

    @property
    def eur_per_hour(self) -> float:
        return self._hourly(self.price.usd_per_hour, "on-demand")

    @property
    def spot_eur_per_hour(self) -> float:
        return self._hourly(self.spot.usd_per_hour, "spot")

    def _hourly(self, usd_per_hour: float, market: str) -> float:
        """An hour of one instance in euros, through the one money function."""
        charge = money.Charge(self.price.backend, self.price.display_name, 1, 0, usd_per_hour,
                              market=market)  # fmt: skip
        eur = money.eur_per_hour(charge, self.rate)
        if eur is None:  # a price was given: only a charge without one has no euros
            raise ValueError(f"no euros for {self.price.display_name} at {usd_per_hour} USD/h")
        return eur

    def note(self) -> str:
        """'retired -> g5.12xlarge' for retired types, else ''."""
        if not self.instance.retired:
            return ""
        return f"retired -> {self.instance.successor}" if self.instance.successor else "retired"

    def as_dict(self) -> dict[str, Any]:
        """Flat JSON/CSV record: instance facts, prices in USD and EUR, dates and sources."""
        i, p, s = self.instance, self.price, self.spot
        return {
            "instance_type": p.display_name,
            "region": p.region,
            "backend": p.backend,
            "gpu_model": i.gpu_model,
            "gpu_count": i.gpu_count,
            "gpu_memory_gib": i.gpu_memory_gib,
            "vcpus": i.vcpus,
            "memory_gib": i.memory_gib,
            "usd_per_hour": p.usd_per_hour,
            "eur_per_hour": round(self.eur_per_hour, 4),
            "price_as_of": p.as_of_iso,
            "price_age": p.age,
            "price_source": p.source,
            "spot_usd_per_hour": round(s.usd_per_hour, 4),
            "spot_eur_per_hour": round(self.spot_eur_per_hour, 4),
            "spot_is_estimate": s.estimate,
            "spot_source": s.source,
            "usd_per_eur": self.rate.usd_per_eur,
            "rate_date": self.rate.on.isoformat(),
            "rate_source": self.rate.source,
            "retired": i.retired,
            "successor": i.successor,
            "note": self.note(),
        }


@dataclass(frozen=True)
class Unpriced:
    """An instance type (in a region, on a backend) for which no sourced price exists."""

    instance: instances.InstanceType
    region: str  # "-" where no region has a price at all
    backend: str
    why: str

    def as_dict(self) -> dict[str, Any]:
        name = self.instance.sagemaker_name() if self.backend == prices.SAGEMAKER else None
        return {
            "instance_type": name or self.instance.name,
            "region": self.region,
            "backend": self.backend,
            "gpu_model": self.instance.gpu_model,
            "gpu_count": self.instance.gpu_count,
            "gpu_memory_gib": self.instance.gpu_memory_gib,
            "vcpus": self.instance.vcpus,
            "memory_gib": self.instance.memory_gib,
            "usd_per_hour": None,
            "eur_per_hour": None,
            "price_age": None,
            "price_source": self.why,
            "spot_eur_per_hour": None,
            "retired": self.instance.retired,
            "successor": self.instance.successor,
            "note": "; ".join(
                x for x in (self.why, "retired" if self.instance.retired else "") if x
            ),
        }


@dataclass
class Listing:
    """Offers plus the provenance a reader needs: rate, sources, cache age, warnings, and
    the instance types without a sourced price."""

    offers: list[Offer]
    rate: fx.Rate
    cache_age: str
    warnings: list[str] = field(default_factory=list)
    unpriced: list[Unpriced] = field(default_factory=list)

    def sources(self) -> list[str]:
        """Distinct price sources, in order of first appearance (for footnotes)."""
        return list(dict.fromkeys(o.price.source for o in self.offers))


def list_offers(
    gpu: str | None = None,
    region: str | None = None,
    backend: str | None = None,
    live_spot: bool = False,
    client_for: Any = None,
) -> Listing:
    """Instances (optionally one GPU model, region, backend) with EUR prices, cheapest last.

    ``live_spot`` asks EC2 for current spot prices (needs credentials); otherwise spot prices
    are the documented default-discount estimate.
    """
    if region:  # a typo is refused, not answered with an empty table
        check_region(region, "--region")
    book = prices.load()
    rates, rate_warnings = fx.load()
    rate = fx.rate_from(rates)
    rows = book.select(gpu=gpu, region=region, backend=backend)
    spots = spot.spot_prices(rows, live=live_spot, client_for=client_for)
    known = instances.all_instances()
    offers = [Offer(known[p.instance_type], p, spots[p.key], rate) for p in rows]
    missing = unpriced(book, gpu, region, backend)
    return Listing(offers, rate, cache.cache_age(), book.warnings + rate_warnings, missing)


def unpriced(
    book: prices.PriceBook,
    gpu: str | None = None,
    region: str | None = None,
    backend: str | None = None,
) -> list[Unpriced]:
    """GPU types with no EC2 price in any region (e.g. retired P2: not in the snapshot), and,
    when SageMaker is asked for, the priced EC2 types whose ml.* price was never refreshed."""
    out = []
    have = {(i, b) for (i, _, b) in book.prices}
    for inst in instances.with_gpu(gpu):
        if backend in (None, prices.EC2) and (inst.name, prices.EC2) not in have:
            why = "no sourced price (not in the catalog snapshot; `finetune prices refresh`)"
            out.append(Unpriced(inst, region or "-", prices.EC2, why))
    if backend != prices.SAGEMAKER:
        return out
    ec2 = {(i, r) for (i, r, b) in book.prices if b == prices.EC2 and region in (None, r)}
    for inst in instances.with_gpu(gpu):
        for i, r in sorted(k for k in ec2 if k[0] == inst.name):
            if (i, r, prices.SAGEMAKER) not in book.prices:
                out.append(Unpriced(inst, r, prices.SAGEMAKER, prices.NO_SAGEMAKER_PRICE))
    return out
