"""The performance model checked against figures it did not learn from.

Every published row (calibration.csv) and gpu-check row (measured.csv) is predicted as the
run it was -- its stack, devices, precision and batch -- with rows left out of everything
the prediction learns (the stacks' efficiencies, the straggler jitter) by ``MODES``: the
row itself; every row of its GPU (the error on a GPU never measured); every row of its
source (a suite never read); every row of its network family. bands.csv holds the 5th-95th
percentile errors these give per level of evidence; benchmarks/estimate_backtest.py prints
them all.

    python -m finetune.estimate.perf.backtest ROWS.csv [--format json]

predicts the rows of your own CSV (calibration.csv's columns), none of them learned from
(a row whose Id is a bundled row's is left out of the fit), and prints each prediction, its
band and error, then the median and worst absolute error and the share inside the band.
"""

from __future__ import annotations

import functools
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from finetune.estimate.perf import calibration, measured, observations, stacks, throughput


class Published(Protocol):
    """A figure the model is checked against: a calibration row or a measured one."""

    @property
    def id(self) -> str: ...

    @property
    def images_per_sec(self) -> float: ...


@dataclass(frozen=True)
class Result:
    """One row: what was published, what the model predicts without it, the error."""

    row: Published
    predicted: float | None
    low: float | None = None
    high: float | None = None
    level: int | None = None

    @property
    def error(self) -> float | None:
        """(predicted - published) / published; None when no prediction was possible."""
        if self.predicted is None:
            return None
        return (self.predicted - self.row.images_per_sec) / self.row.images_per_sec

    @property
    def inside(self) -> bool:
        return (
            self.low is not None
            and self.high is not None
            and (self.low <= self.row.images_per_sec <= self.high)
        )


def setup_of(row: calibration.Row) -> throughput.Setup:
    """A published row's own setup, software stack included."""
    return throughput.Setup(
        network=row.network, gpu_model=row.gpu_model, precision=row.precision,
        batch_per_device=row.batch_per_device or observations.DEFAULT_BATCH,
        image_size=row.image_size, gpus_per_host=row.gpus_per_host, hosts=row.hosts,
        kind=row.kind, layout=row.layout, framework=row.framework,
        pipeline_kind=row.pipeline,
    )  # fmt: skip


def setup_of_measured(row: measured.Row) -> throughput.Setup:
    """A gpu-check row's setup: the engine's job on its data path, or the plain loop."""
    stack = stacks.of_measured(row)
    return throughput.Setup(
        network=row.network, gpu_model=row.gpu_model, precision=row.precision,
        batch_per_device=row.batch, image_size=row.image_size, kind=stack.kind,
        compile=row.compile == "inductor", layout=row.layout, framework=stack.framework,
        pipeline_kind=stack.pipeline,
    )  # fmt: skip


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


def _result(row: Published, setup: throughput.Setup, gone: frozenset[str]) -> Result:
    p = throughput.predict(setup, exclude=gone)
    if p is None:
        return Result(row, None)
    return Result(row, p.images_per_sec, p.low, p.high, p.level)


def predict_row(row: calibration.Row, mode: str = "row") -> Result:
    """The row predicted with ``MODES[mode]``'s rows left out."""
    return _result(row, setup_of(row), MODES[mode][1](row.id))


def run(mode: str = "row") -> list[Result]:
    """Every calibration row, predicted by ``mode``."""
    return [predict_row(row, mode) for row in calibration.rows()]


def run_measured(mode: str = "gpu") -> list[Result]:
    """Every gpu-check row predicted by ``mode`` (default: with every row of its GPU, its
    own and the published ones, left out: the H100 from the H200 and the reverse)."""
    return [_result(r, setup_of_measured(r), MODES[mode][1](r.id)) for r in measured.rows()]


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
    from finetune.estimate.perf import userrows

    return userrows.main(argv)


if __name__ == "__main__":
    sys.exit(main())
