"""Hourly on-demand prices in USD per instance type, region and backend, with date and source.

Bundled data (prices.csv, SkyPilot-style rows) is overlaid by the user cache that
``finetune prices refresh`` writes to <cache dir>/prices/prices.csv: a cached row replaces the
bundled row with the same (instance, region, backend). A corrupt cache is ignored with a
warning, never silently: the bundled snapshot still answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from finetune.catalog import instances
from finetune.catalog._files import bundled_text, cache_dir, read_rows, rows_to_csv
from finetune.errors import DataError, FinetuneError, UsageError, did_you_mean

HEADER = ("InstanceType", "Region", "Backend", "PriceUSD", "AsOf", "Source")
BACKENDS = ("ec2", "sagemaker")
CACHE_FILE = "prices.csv"


@dataclass(frozen=True)
class Price:
    """On-demand USD per instance-hour; SageMaker rows are ml.* training prices."""

    instance_type: str  # EC2 name, also for SageMaker rows ("p3.2xlarge" = ml.p3.2xlarge)
    region: str
    backend: str  # ec2 | sagemaker
    usd_per_hour: float
    as_of: date
    source: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.instance_type, self.region, self.backend)

    @property
    def display_name(self) -> str:
        """The name AWS bills under: 'ml.p3.2xlarge' on SageMaker, 'p3.2xlarge' on EC2."""
        return f"ml.{self.instance_type}" if self.backend == "sagemaker" else self.instance_type


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
        (p.instance_type, p.region, p.backend, f"{p.usd_per_hour:g}", p.as_of.isoformat(), p.source)
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

    def get(self, instance: str, region: str, backend: str = "ec2") -> Price:
        """The price of ``instance`` in ``region`` on ``backend``, or an error saying what to do."""
        check_backend(backend)
        inst = instances.get(instance)  # UsageError with did-you-mean for unknown names
        found = self.prices.get((inst.name, region, backend))
        if found is not None:
            return found
        where = sorted(r for (i, r, b) in self.prices if i == inst.name and b == backend)
        known = f" Known regions for it: {', '.join(where)}." if where else ""
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


def check_backend(backend: str) -> None:
    """UsageError (with a suggestion) unless ``backend`` is ec2 or sagemaker."""
    if backend not in BACKENDS:
        raise UsageError(
            f'Unknown backend "{backend}".{did_you_mean(backend, BACKENDS)}',
            "use --backend ec2 or --backend sagemaker.",
        )


def load(directory: Path | None = None) -> PriceBook:
    """Bundled prices overlaid by the user cache (``directory`` defaults to the settings')."""
    bundled = parse_csv(bundled_text("prices.csv"), "prices.csv (bundled)")
    cached, warnings = read_cache(directory)
    merged = {p.key: p for p in bundled}
    known = instances.all_instances()
    merged.update({p.key: p for p in cached if p.instance_type in known})
    return PriceBook(merged, warnings)


def price(instance: str, region: str, backend: str = "ec2") -> Price:
    """Convenience: ``load().get(...)`` for one lookup."""
    return load().get(instance, region, backend)
