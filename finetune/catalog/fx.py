"""The euro: ECB reference rates, quoted as USD per 1 EUR, so EUR = USD / rate.

The ECB publishes on TARGET working days only: weekends and holidays have no rate, and the
rate that applies to such a day is the latest one published on or before it. Bundled rates
(eur_rates.csv) are overlaid by those ``finetune prices refresh`` caches from the ECB feed.
"""

from __future__ import annotations

import bisect
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from finetune.catalog._files import bundled_text, cache_dir, read_rows, rows_to_csv
from finetune.errors import DataError, FinetuneError

HEADER = ("Date", "USDPerEUR", "Source")
CACHE_FILE = "eur_rates.csv"
ECB_SOURCE = "ECB euro foreign exchange reference rate"


@dataclass(frozen=True)
class Rate:
    """One EUR costs ``usd_per_eur`` USD on ``on`` (the publication date actually used)."""

    usd_per_eur: float
    on: date
    source: str

    def to_eur(self, usd: float) -> float:
        return usd / self.usd_per_eur

    def describe(self) -> str:
        return f"1 EUR = {self.usd_per_eur:.4f} USD on {self.on.isoformat()} ({self.source})"


def parse_ecb_xml(data: str | bytes) -> dict[date, float]:
    """USD rates by date from an ECB eurofxref XML (daily or historical feed).

    Namespaces are ignored on purpose: only the Cube elements' attributes matter.
    """
    try:
        # bandit B314 (untrusted XML): CPython's expat (>= 2.4.1) refuses billion-laughs and
        # quadratic-blowup documents and ElementTree never resolves external entities
        # (Python docs, "XML vulnerabilities"); the feed comes over HTTPS from the ECB
        root = ET.fromstring(data)  # nosec B314
    except ET.ParseError as exc:
        raise DataError(
            f"The ECB reference-rate feed is not valid XML ({exc}).",
            "try again later; the bundled or cached rates are still used.",
        ) from None
    rates: dict[date, float] = {}
    for cube in root.iter():
        if not cube.tag.endswith("Cube") or "time" not in cube.attrib:
            continue
        for child in cube:
            if child.attrib.get("currency") == "USD":
                rates[date.fromisoformat(cube.attrib["time"])] = float(child.attrib["rate"])
    if not rates:
        raise DataError(
            "The ECB feed has no USD reference rate in it.",
            "check the feed URL (FINETUNE_ECB_URL) or try again later.",
        )
    return rates


def rate_on(rates: Mapping[date, float], on: date) -> tuple[date, float]:
    """The rate that applies on ``on``: the latest published on or before that day."""
    days = sorted(rates)
    i = bisect.bisect_right(days, on)
    if i == 0:
        first = days[0].isoformat() if days else "none"
        raise DataError(
            f"No EUR/USD reference rate on or before {on.isoformat()} (earliest known: {first}).",
            "run `finetune prices refresh` to fetch current ECB rates.",
        )
    return days[i - 1], rates[days[i - 1]]


def parse_csv(text: str, origin: str) -> dict[date, tuple[float, str]]:
    """Rates from eur_rates.csv text: {date: (usd_per_eur, source)}."""
    out = {}
    for n, row in enumerate(read_rows(text, HEADER, origin), start=2):
        try:
            value = float(row["USDPerEUR"])
            out[date.fromisoformat(row["Date"])] = (value, row["Source"])
        except (TypeError, ValueError) as exc:
            raise DataError(
                f"{origin} line {n} is not a valid rate row ({exc}).",
                "delete the file (it is a cache) and run `finetune prices refresh`.",
            ) from None
        if value <= 0:
            raise DataError(f"{origin} line {n}: the rate must be positive.", "delete the file.")
    return out


def to_csv(rates: Mapping[date, tuple[float, str]]) -> str:
    """eur_rates.csv text for {date: (usd_per_eur, source)}, oldest first."""
    return rows_to_csv(
        HEADER, [(d.isoformat(), f"{v:g}", s) for d, (v, s) in sorted(rates.items())]
    )


def read_cache(directory: Path | None = None) -> tuple[dict[date, tuple[float, str]], list[str]]:
    """Cached rates and warnings; a missing cache is normal, a corrupt one is a warning."""
    path = (directory or cache_dir()) / CACHE_FILE
    if not path.is_file():
        return {}, []
    try:
        return parse_csv(path.read_text(encoding="utf-8"), str(path)), []
    except (FinetuneError, OSError, UnicodeDecodeError) as exc:
        return {}, [f"Ignoring the exchange-rate cache: {exc}"]


def load(directory: Path | None = None) -> tuple[dict[date, tuple[float, str]], list[str]]:
    """Bundled rates overlaid by cached ones, and warnings (a corrupt cache is skipped)."""
    rates = parse_csv(bundled_text("eur_rates.csv"), "eur_rates.csv (bundled)")
    cached, warnings = read_cache(directory)
    rates.update(cached)
    return rates, warnings


def rate_from(rates: Mapping[date, tuple[float, str]], on: date | None = None) -> Rate:
    """The Rate for ``on`` (default: the latest) from rates as ``load`` returns them."""
    day, value = rate_on({d: v for d, (v, _) in rates.items()}, on or date.max)
    return Rate(usd_per_eur=value, on=day, source=rates[day][1])


def eur_rate(on: date | None = None, directory: Path | None = None) -> Rate:
    """The EUR reference rate for ``on`` (default: the latest known), with its date and source."""
    return rate_from(load(directory)[0], on)
