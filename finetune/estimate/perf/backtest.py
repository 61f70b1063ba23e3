"""The performance model checked against figures it did not learn from: every published and
gpu-check row predicted with rows left out by ``MODES`` (itself, its GPU, its source, its
network family); bands.csv holds the errors per level. ``python -m
finetune.estimate.perf.backtest ROWS.csv [--format json]`` does it for your own rows
(userrows.py)."""

from __future__ import annotations

import functools
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

from finetune.estimate.perf import calibration, measured, observations, userrows
from finetune.estimate.perf.checked import Result, result, setup_of, setup_of_measured


@functools.cache
def _facts() -> dict[str, observations.Obs]:
    return {o.id: o for o in observations.observations()}


def _alike(attr: str) -> Callable[[str], frozenset[str]]:
    def gone(rid: str) -> frozenset[str]:
        mine = getattr(_facts()[rid], attr)
        return frozenset(i for i, o in _facts().items() if getattr(o, attr) == mine)

    return gone


MODES: dict[str, tuple[str, Callable[[str], frozenset[str]]]] = {
    "row": ("leave one row out", lambda rid: frozenset({rid})),
    "gpu": ("leave the GPU out", _alike("gpu")),
    "source": ("leave the source out", _alike("source")),
    "family": ("leave the family out", _alike("family")),
}


def predict_row(row: calibration.Row, mode: str = "row") -> Result:
    """The row predicted with ``MODES[mode]``'s rows left out."""
    return result(row, setup_of(row), MODES[mode][1](row.id))


def run(mode: str = "row") -> list[Result]:
    """Every calibration row, predicted by ``mode``."""
    return [predict_row(row, mode) for row in calibration.rows()]


def run_measured(mode: str = "gpu") -> list[Result]:
    """Every gpu-check row predicted by ``mode`` (default: with every row of its GPU, its
    own and the published ones, left out: the H100 from the H200 and the reverse)."""
    return [result(r, setup_of_measured(r), MODES[mode][1](r.id)) for r in measured.rows()]


def summary(results: Sequence[Result]) -> dict[str, Any]:
    """Median and worst absolute error, rows inside their band, rows without a prediction."""
    errors = [abs(e) for r in results if (e := r.error) is not None]
    return {
        "rows": len(results),
        "predicted": len(errors),
        "unpredicted": [r.row.id for r in results if r.error is None],
        "median_abs_error": statistics.median(errors) if errors else None,
        "worst_abs_error": max(errors) if errors else None,
        "within_band": sum(1 for r in results if r.inside),
    }


def main(argv: list[str] | None = None) -> int:
    return userrows.main(argv)


if __name__ == "__main__":
    sys.exit(main())
