"""Hourly on-demand prices in USD per instance type, region and backend, with age and source.

EC2 prices come from the bundled catalog snapshot (catalog/snapshot.py: SkyPilot's public AWS
catalog at a named commit, labelled "catalog snapshot (2025 or later)"), overlaid by the user
cache that ``finetune prices refresh`` writes to <cache dir>/prices/prices.csv (rows dated by
their fetch). No dated public table of SageMaker training prices exists, so ml.* prices come
from a refresh only; until then ``quote`` estimates them as the EC2 price times the
SageMaker markup setting, labelled an estimate, never listed as a price. A corrupt cache is
ignored with a warning, never silently: the bundled snapshot still answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from finetune import settings
from finetune.catalog import instances, snapshot
from finetune.catalog._files import read_rows, rows_to_csv
from finetune.catalog.usercache import cache_dir
from finetune.errors import DataError, FinetuneError, UsageError, did_you_mean

HEADER = ("InstanceType", "Region", "Backend", "PriceUSD", "AsOf", "Source")
# The AWS price lists a price comes from (the Pricing API's AmazonEC2 / AmazonSageMaker);
# the CSV column and the field keep the name "backend" (a file and JSON format in use).
EC2, SAGEMAKER = "ec2", "sagemaker"
BACKENDS = (EC2, SAGEMAKER)
CACHE_FILE = "prices.csv"
DEFAULT_SAGEMAKER_MARKUP = 0.25  # ml.* training runs 15-25 % above EC2: the dear end, on purpose
NO_SAGEMAKER_PRICE = "no sourced price: run `finetune prices refresh`"


@dataclass(frozen=True)
class Price:
    """On-demand USD per instance-hour; SageMaker rows are ml.* training prices."""

    instance_type: str  # EC2 name, also for SageMaker rows ("p3.2xlarge" = ml.p3.2xlarge)
    region: str
    backend: str  # ec2 | sagemaker
    usd_per_hour: float
    as_of: date | None  # the fetch date of a refreshed row; None for the undated snapshot
    source: str
    estimate: bool = False  # True: derived (SageMaker = EC2 x markup), not a published price

    @property
    def as_of_iso(self) -> str | None:
        return self.as_of.isoformat() if self.as_of else None

    @property
    def age(self) -> str:
        """How old the figure is: 'fetched YYYY-MM-DD', or the snapshot's label."""
        if self.as_of is not None:
            return f"fetched {self.as_of.isoformat()}"
        return snapshot.provenance().label

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.instance_type, self.region, self.backend)

    @property
    def display_name(self) -> str:
        """The name AWS bills under: 'ml.p3.2xlarge' on SageMaker, 'p3.2xlarge' on EC2."""
        return f"ml.{self.instance_type}" if self.backend == SAGEMAKER else self.instance_type


def parse_csv(text: str, origin: str) -> list[Price]:
    """Prices from catalog CSV text; DataError naming the file and line when a row is bad."""
    out = []
    for n, row in enumerate(read_rows(text, HEADER, origin), start=2):
        try:
            price = Price(
                instance_type=instances.canonical_name(row["InstanceType"]),
                region=row["Region"].strip(),
                backend=row["Backend"].strip(),
                usd_per_hour=float(row["PriceUSD"]),
                as_of=date.fromisoformat(row["AsOf"]),
                source=row["Source"],
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise DataError(
                f"{origin} line {n} is not a valid price row ({exc}).",
                "delete the file (it is a cache) and run `finetune prices refresh`.",
            ) from None
        if price.backend not in BACKENDS or price.usd_per_hour <= 0:
            raise DataError(
                f"{origin} line {n}: backend must be ec2 or sagemaker and the price positive.",
                "delete the file (it is a cache) and run `finetune prices refresh`.",
            )
        out.append(price)
    return out


def to_csv(prices: list[Price]) -> str:
    """Catalog CSV text for ``prices``, sorted so diffs of the cache stay readable."""
    rows = [
        (p.instance_type, p.region, p.backend, f"{p.usd_per_hour:g}", p.as_of_iso, p.source)
        for p in sorted(prices, key=lambda p: (p.backend, p.region, p.instance_type))
    ]
    return rows_to_csv(HEADER, rows)


def read_cache(directory: Path | None = None) -> tuple[list[Price], list[str]]:
    """Cached prices and warnings; a missing cache is normal, a corrupt one is a warning."""
    path = (directory or cache_dir()) / CACHE_FILE
    if not path.is_file():
        return [], []
    try:
        return parse_csv(path.read_text(encoding="utf-8"), str(path)), []
    except (FinetuneError, OSError, UnicodeDecodeError) as exc:
        return [], [f"Ignoring the price cache: {exc}"]


@dataclass
class PriceBook:
    """All known prices (bundled overlaid by the cache) and what went wrong loading them."""

    prices: dict[tuple[str, str, str], Price]
    warnings: list[str] = field(default_factory=list)

    def regions(self, backend: str | None = None) -> list[str]:
        return sorted({p.region for p in self.prices.values() if backend in (None, p.backend)})

    def get(self, instance: str, region: str, backend: str = EC2) -> Price:
        """The price of ``instance`` in ``region`` on ``backend``, or an error saying what to do."""
        check_backend(backend)
        inst = instances.get(instance)  # UsageError with did-you-mean for unknown names
        found = self.prices.get((inst.name, region, backend))
        if found is not None:
            return found
        where = sorted(r for (i, r, b) in self.prices if i == inst.name and b == backend)
        known = f" Known regions for it: {', '.join(where)}." if where else ""
        if backend == SAGEMAKER and not where:
            raise DataError(
                f"ml.{inst.name} in {region}: {NO_SAGEMAKER_PRICE} (no dated public table of "
                "SageMaker training prices exists).",
                f"run `finetune prices refresh --region {region} --backend sagemaker` "
                "(AWS Pricing API).",
            )
        if backend == EC2 and not any(i == inst.name for (i, _, _) in self.prices):
            raise DataError(
                f"No sourced price for {inst.name}: it is not in the bundled catalog snapshot "
                f"({snapshot.provenance().source()})"
                + (" and AWS has retired it." if inst.retired else "."),
                f"run `finetune prices refresh --region {region}` (AWS Pricing API)"
                + (f", or use its successor {inst.successor}." if inst.successor else "."),
            )
        hint = "" if region in self.regions() else did_you_mean(region, self.regions())
        raise DataError(
            f"No {backend} price for {inst.name} in {region}.{hint}{known}",
            f"run `finetune prices refresh --region {region}` (AWS Pricing API), "
            "or pick a region that has a price.",
        )

    def select(
        self, gpu: str | None = None, region: str | None = None, backend: str | None = None
    ) -> list[Price]:
        """Prices filtered by GPU model, region and backend, ordered for a listing."""
        if backend:
            check_backend(backend)
        if region and region not in self.regions():
            raise DataError(
                f"No prices for region {region}.{did_you_mean(region, self.regions())}",
                f"run `finetune prices refresh --region {region}`, "
                f"or use one of: {', '.join(self.regions())}.",
            )
        order = {i.name: n for n, i in enumerate(instances.with_gpu(gpu))}
        rows = [
            p
            for p in self.prices.values()
            if p.instance_type in order
            and region in (None, p.region)
            and backend in (None, p.backend)
        ]
        return sorted(rows, key=lambda p: (order[p.instance_type], p.region, p.backend))

    def quote(self, instance: str, region: str, backend: str = EC2) -> Price:
        """Like ``get``, but a SageMaker type without a refreshed price is estimated as its EC2
        price times the SageMaker markup setting -- marked ``estimate`` and labelled so."""
        try:
            return self.get(instance, region, backend)
        except DataError:
            if backend != SAGEMAKER:
                raise
        ec2 = self.get(instance, region, EC2)
        markup = sagemaker_markup()
        return Price(
            instance_type=ec2.instance_type,
            region=region,
            backend=SAGEMAKER,
            usd_per_hour=ec2.usd_per_hour * (1 + markup),
            as_of=ec2.as_of,
            source=(
                f"estimate: EC2 on-demand x {1 + markup:.2f} (SageMaker markup "
                f"FINETUNE_SAGEMAKER_MARKUP={markup:g}, default {DEFAULT_SAGEMAKER_MARKUP:g}; "
                f"{NO_SAGEMAKER_PRICE}); EC2: {ec2.source}"
            ),
            estimate=True,
        )


def sagemaker_markup() -> float:
    """The SageMaker-over-EC2 markup estimates use (setting FINETUNE_SAGEMAKER_MARKUP)."""
    return settings.get().sagemaker_markup


def snapshot_prices() -> list[Price]:
    """On-demand EC2 prices from the bundled catalog snapshot, for catalog instance types
    (rows whose source has no on-demand price are left out: no price, not a zero)."""
    known = instances.all_instances()
    source = snapshot.provenance().source()
    return [
        Price(itype, region, EC2, row.on_demand, None, source)
        for (itype, region), row in sorted(snapshot.rows().items())
        if itype in known and row.on_demand
    ]


def check_backend(backend: str) -> None:
    """UsageError (with a suggestion) unless ``backend`` is ec2 or sagemaker."""
    if backend not in BACKENDS:
        raise UsageError(
            f'Unknown backend "{backend}".{did_you_mean(backend, BACKENDS)}',
            "use --backend ec2 or --backend sagemaker.",
        )


def load(directory: Path | None = None) -> PriceBook:
    """The catalog snapshot overlaid by the user cache (``directory``: the settings')."""
    bundled = snapshot_prices()
    cached, warnings = read_cache(directory)
    merged = {p.key: p for p in bundled}
    known = instances.all_instances()
    merged.update({p.key: p for p in cached if p.instance_type in known})
    return PriceBook(merged, warnings)


def price(instance: str, region: str, backend: str = EC2) -> Price:
    """Convenience: ``load().quote(...)`` for one lookup (SageMaker may be an estimate)."""
    return load().quote(instance, region, backend)
