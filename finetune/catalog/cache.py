"""The user's price cache (<cache dir>/prices): merged writes, refresh stamps and its age.

A refresh merges into what is cached (new rows win) and stamps the time per kind in
refresh.json, so `finetune prices` and an offline refresh can say how old the data is.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from finetune.catalog import fx, prices
from finetune.catalog._files import atomic_write
from finetune.catalog.usercache import cache_dir

META_FILE = "refresh.json"


def read_meta(directory: Path) -> dict:
    """refresh.json's content ({} when missing or damaged)."""
    try:
        return json.loads((directory / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def cache_age(directory: Path | None = None, now: datetime | None = None) -> str:
    """'prices 3 days old, rates 2 hours old' -- or that only the bundled snapshot exists."""
    directory = directory or cache_dir()
    now = now or datetime.now(timezone.utc)
    meta = read_meta(directory)
    parts = []
    for kind in ("prices", "rates"):
        try:
            when = datetime.fromisoformat(meta[kind])
        except (KeyError, TypeError, ValueError):
            continue  # never refreshed, or a damaged stamp: say nothing rather than guess
        parts.append(f"{kind} {_humanize(now - when)} old")
    return ", ".join(parts) if parts else "empty: the bundled snapshot is used"


def _humanize(delta) -> str:
    seconds = max(delta.total_seconds(), 0)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''}"
    return "less than a minute"


def write_prices(directory: Path, fetched: list[prices.Price]) -> None:
    """Merge ``fetched`` into the cached prices (same instance/region/backend: new wins)."""
    old, _ = prices.read_cache(directory)  # a corrupt old cache is simply replaced
    merged = {p.key: p for p in old}
    merged.update({p.key: p for p in fetched})
    atomic_write(directory / prices.CACHE_FILE, prices.to_csv(list(merged.values())))


def write_rates(directory: Path, fetched: dict) -> None:
    """Merge ECB rates {date: usd_per_eur} into the cached rates."""
    merged, _ = fx.read_cache(directory)  # a corrupt old cache is simply replaced
    merged.update({d: (v, fx.ECB_SOURCE) for d, v in fetched.items()})
    atomic_write(directory / fx.CACHE_FILE, fx.to_csv(merged))


def stamp(directory: Path, kind: str, now: datetime) -> None:
    """Record that ``kind`` (prices | rates) was refreshed at ``now``."""
    meta = read_meta(directory)
    meta[kind] = now.isoformat()
    atomic_write(directory / META_FILE, json.dumps(meta, indent=2) + "\n")
