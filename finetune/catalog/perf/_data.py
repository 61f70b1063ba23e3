"""Where the performance model's CSVs live (package data: finetune/catalog/perf/NAME)."""

from __future__ import annotations

from importlib import resources


def perf_text(name: str) -> str:
    """The text of a CSV shipped in finetune/catalog/perf."""
    return resources.files("finetune.catalog.perf").joinpath(name).read_text(encoding="utf-8")
