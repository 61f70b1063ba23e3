"""The bundled EC2 price snapshot: SkyPilot's public AWS catalog, filtered to GPU families.

skypilot_aws_vms.csv is a verbatim filtered copy of skypilot-org/skypilot-catalog
catalogs/v8/aws/vms.csv at one commit; its sidecar (skypilot_aws_vms.source.json) names the
repository, path and commit, and every price derived here carries them in its source. The
snapshot's date is not recorded: it is labelled "catalog snapshot (2025 or later)", never
given an invented date. Each row is one availability zone: the on-demand price is the
region's, the spot price that zone's when the catalog was built.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from functools import lru_cache

from finetune.catalog._files import bundled_text, read_rows

FILE = "skypilot_aws_vms.csv"
SIDECAR = "skypilot_aws_vms.source.json"
COLUMNS = ("InstanceType", "Price", "SpotPrice", "Region", "AvailabilityZone")


@dataclass(frozen=True)
class Provenance:
    """Where the snapshot comes from: repository, path, commit and the age label."""

    repository: str
    path: str
    commit: str
    label: str

    def source(self) -> str:
        """The source line every price from the snapshot carries."""
        return f"SkyPilot catalog, {self.label}: {self.repository} {self.path} @ {self.commit[:12]}"


@dataclass(frozen=True)
class Row:
    """One (instance type, region): on-demand USD/h (None: the source has none) and the
    spot prices of the region's zones that have one."""

    instance_type: str
    region: str
    on_demand: float | None
    spot_by_zone: tuple[tuple[str, float], ...]

    @property
    def spot_median(self) -> float | None:
        prices = [p for _, p in self.spot_by_zone]
        return statistics.median(prices) if prices else None


@lru_cache(maxsize=1)
def provenance() -> Provenance:
    """The sidecar's facts about the bundled snapshot."""
    meta = json.loads(bundled_text(SIDECAR))
    return Provenance(meta["repository"], meta["path"], meta["commit"], meta["label"])


def _number(text: str) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


@lru_cache(maxsize=1)
def rows() -> dict[tuple[str, str], Row]:
    """{(instance type, region): Row} from the bundled snapshot (read once)."""
    zones: dict[tuple[str, str], list[tuple[str, float]]] = {}
    on_demand: dict[tuple[str, str], float | None] = {}
    for r in read_rows(bundled_text(FILE), COLUMNS, f"{FILE} (bundled)"):
        key = (r["InstanceType"].strip(), r["Region"].strip())
        price = _number(r["Price"])
        if on_demand.get(key) is None:
            on_demand[key] = price
        zones.setdefault(key, [])
        spot = _number(r["SpotPrice"])
        if spot is not None:
            zones[key].append((r["AvailabilityZone"].strip(), spot))
    return {k: Row(k[0], k[1], on_demand[k], tuple(zones[k])) for k in on_demand}


def spot_source(row: Row) -> str:
    """How a snapshot spot figure was made, with the snapshot's provenance."""
    n = len(row.spot_by_zone)
    return (
        f"snapshot spot: median of {n} zone price(s) in {row.region} when the catalog was "
        f"built; spot prices move hourly, `finetune prices --spot` asks EC2 "
        f"({provenance().source()})"
    )
