"""Where the performance model's CSVs live (package data: finetune/estimate/perf/NAME)."""

from __future__ import annotations

from importlib import resources


def perf_text(name: str) -> str:
    """The text of a CSV shipped in finetune/estimate/perf."""
    return resources.files("finetune.estimate.perf").joinpath(name).read_text(encoding="utf-8")
