"""Spot prices: the current EC2 price when asked, otherwise an estimate -- always labelled.

For EC2 the estimate is the catalog snapshot's spot price: the median over the region's zones
when the catalog was built (catalog/snapshot.py), labelled a snapshot. Where the snapshot has
no spot price (and for SageMaker managed spot) it is on-demand x (1 - DEFAULT_SPOT_DISCOUNT).
DescribeSpotPriceHistory, asked at launch or by `prices --spot`, always wins. AWS advertises
spot discounts of "up to 90 %"; GPU spot prices move by region, zone and hour, and 60 % off
is a middle figure, deliberately not the best case, so estimates err on the expensive side.
SageMaker managed spot is billed as BillableTimeInSeconds at the on-demand ml.* price
(savings = 1 - billable / training time), so for SageMaker the same estimate describes the
expected saving.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

from finetune.aws.errors import aws_errors
from finetune.aws.session import connect
from finetune.catalog import snapshot
from finetune.catalog.prices import EC2, Price

DEFAULT_SPOT_DISCOUNT = 0.60
DEFAULT_SOURCE = (
    f"estimate: on-demand minus {DEFAULT_SPOT_DISCOUNT:.0%} (default spot discount; "
    "`finetune prices --spot` asks EC2 for current prices)"
)


@dataclass(frozen=True)
class SpotPrice:
    """USD per instance-hour on spot; ``estimate`` is False only for a price EC2 reported."""

    instance_type: str
    region: str
    usd_per_hour: float
    estimate: bool
    source: str
    as_of: date | None  # None: the undated catalog snapshot (its source says so)
    zone: str = ""

    @property
    def as_of_iso(self) -> str | None:
        return self.as_of.isoformat() if self.as_of else None


def estimated(on_demand: Price, discount: float = DEFAULT_SPOT_DISCOUNT) -> SpotPrice:
    """The spot estimate for ``on_demand``: the snapshot's regional median for EC2 where it
    has one, else the default discount (both labelled as estimates)."""
    row = snapshot.rows().get((on_demand.instance_type, on_demand.region))
    if on_demand.backend == EC2 and row is not None and row.spot_median is not None:
        return SpotPrice(
            instance_type=on_demand.instance_type,
            region=on_demand.region,
            usd_per_hour=row.spot_median,
            estimate=True,
            source=snapshot.spot_source(row),
            as_of=None,
        )
    return SpotPrice(
        instance_type=on_demand.instance_type,
        region=on_demand.region,
        usd_per_hour=on_demand.usd_per_hour * (1.0 - discount),
        estimate=True,
        source=DEFAULT_SOURCE,
        as_of=on_demand.as_of,
    )


def current(
    instance_types: list[str], region: str, client=None, zone: str = ""
) -> dict[str, SpotPrice]:
    """The lowest current Linux spot price per instance type across the region's zones (only
    in ``zone`` when given: the price an instance there pays)."""
    found = zone_prices(instance_types, region, client, zone)
    return lowest(found, relabel=not zone)


def zone_prices(
    instance_types: list[str], region: str, client=None, zone: str = ""
) -> dict[tuple[str, str], SpotPrice]:
    """The current Linux spot price of each instance type in each of the region's zones (only
    ``zone`` when given), keyed (instance type, zone): what an instance there pays.

    Uses EC2 DescribeSpotPriceHistory with StartTime=now, which returns the price in force in
    each zone; types EC2 does not price (retired ones) are simply absent from the result.
    """
    client = client or connect(region=region).client("ec2")
    latest: dict[tuple[str, str], dict] = {}
    with aws_errors("DescribeSpotPriceHistory", region=region):  # a CloudError with a fix
        for item in _history(client, instance_types, zone):
            key = (item["InstanceType"], item["AvailabilityZone"])
            if key not in latest or item["Timestamp"] > latest[key]["Timestamp"]:
                latest[key] = item
    return {
        (itype, az): SpotPrice(
            instance_type=itype,
            region=region,
            usd_per_hour=float(item["SpotPrice"]),
            estimate=False,
            source=f"EC2 spot price history, price in the instance's zone ({az})",
            as_of=item["Timestamp"].date(),
            zone=az,
        )
        for (itype, az), item in latest.items()
    }


def lowest(zoned: dict[tuple[str, str], SpotPrice], relabel: bool = True) -> dict[str, SpotPrice]:
    """The lowest zone price per instance type of ``zoned`` (zone_prices), labelled as the
    region's lowest unless ``relabel`` is False."""
    best: dict[str, SpotPrice] = {}
    for (itype, _), price in zoned.items():
        if itype not in best or price.usd_per_hour < best[itype].usd_per_hour:
            best[itype] = price
    if not relabel:
        return best
    return {
        t: replace(p, source=f"EC2 spot price history, lowest current zone price ({p.zone})")
        for t, p in best.items()
    }


def _history(client, instance_types: list[str], zone: str = ""):
    """Every DescribeSpotPriceHistory item (of ``zone`` when given), following NextToken."""
    kwargs = dict(
        InstanceTypes=instance_types,
        ProductDescriptions=["Linux/UNIX"],
        StartTime=datetime.now(UTC),
    )
    if zone:
        kwargs["Filters"] = [{"Name": "availability-zone", "Values": [zone]}]
    while True:
        page = client.describe_spot_price_history(**kwargs)
        yield from page.get("SpotPriceHistory", [])
        if not page.get("NextToken"):
            return
        kwargs["NextToken"] = page["NextToken"]


def spot_prices(
    on_demand: list[Price], live: bool = False, client_for=None
) -> dict[tuple[str, str, str], SpotPrice]:
    """A spot price for each on-demand price: EC2's current price if ``live``, else estimates.

    Live prices exist for EC2 only; SageMaker rows and types EC2 no longer prices keep the
    estimate. ``client_for(region)`` makes the EC2 client (tests point it at a local server).
    """
    out = {p.key: estimated(p) for p in on_demand}
    if not live:
        return out
    by_region: dict[str, list[Price]] = {}
    for p in on_demand:
        if p.backend == EC2:
            by_region.setdefault(p.region, []).append(p)
    for region, rows in by_region.items():
        client = client_for(region) if client_for else None
        found = current(sorted({p.instance_type for p in rows}), region, client)
        for p in rows:
            if p.instance_type in found:
                out[p.key] = found[p.instance_type]
    return out


# -- expected interruptions (what a spot estimate adds to the run's time) -------------------
# An assumption, stated: the top bucket of AWS's Spot Instance Advisor, erring on the expensive
# side (docs/decisions/062-spot-interruption-rate.md)
INTERRUPTIONS_PER_MONTH = 0.20
HOURS_PER_MONTH = 730.0
INTERRUPTION_SOURCE = (
    "assumed 20 % of spot instances interrupted a month (the top 'frequency of interruption' "
    "bucket of AWS's Spot Instance Advisor, https://aws.amazon.com/ec2/spot/instance-advisor/)"
)


@dataclass(frozen=True)
class Interruptions:
    """The expected interruptions of a spot run and the time they add."""

    expected: float  # interruptions over the run (any host's ends the attempt)
    seconds: float  # training time lost: half a checkpoint interval per interruption
    checkpoint_interval_s: float

    def describe(self) -> str:
        return (
            f"spot interruptions: {self.expected:.3f} expected x {self.checkpoint_interval_s:g} s "
            f"checkpoint interval / 2 = +{self.seconds:.0f} s ({INTERRUPTION_SOURCE})"
        )


def interruption_overhead(
    run_seconds: float, hosts: int, checkpoint_interval_s: float
) -> Interruptions:
    """Expected interruptions of ``hosts`` spot instances over ``run_seconds`` and the work
    they lose: a run resumes from its last checkpoint, on average half an interval back."""
    rate = INTERRUPTIONS_PER_MONTH / HOURS_PER_MONTH  # per instance-hour
    expected = max(run_seconds, 0.0) / 3600.0 * max(hosts, 1) * rate
    return Interruptions(expected, expected * checkpoint_interval_s / 2.0, checkpoint_interval_s)
