"""Leave-one-out backtest of the performance model against its own calibration rows.

Every row is predicted from all the others (the row is excluded from the MFU it learns, the
record bound, the plain share and the fitted straggler jitter), as the kind of run it is (a
tuned record is predicted as a tuned record, a plain loop as a plain loop), on its own
devices, precision and batch. The figures are what tests/catalog/test_perf_backtest.py
bounds and benchmarks/estimate_backtest.py prints; nothing here is tuned to them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Protocol

from finetune.estimate.perf import calibration, mfu, throughput


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

    @property
    def error(self) -> float | None:
        """(predicted - published) / published; None when no prediction was possible."""
        if self.predicted is None:
            return None
        return (self.predicted - self.row.images_per_sec) / self.row.images_per_sec


def setup_of(row: calibration.Row) -> throughput.Setup:
    """The row's own setup, as the model takes it."""
    return throughput.Setup(
        network=row.network,
        gpu_model=row.gpu_model,
        precision=row.precision,
        batch_per_device=mfu.batch_of(row),
        image_size=row.image_size,
        gpus_per_host=row.gpus_per_host,
        hosts=row.hosts,
        kind=row.kind,
    )


def predict_row(row: calibration.Row, leave_gpu_out: bool = False) -> Result:
    """The row predicted with itself left out (``leave_gpu_out``: with every row of its GPU
    model left out, a harder test of the transfer between GPUs)."""
    gone = {row.id}
    if leave_gpu_out:
        gone |= {r.id for r in calibration.rows() if r.gpu_model == row.gpu_model}
    p = throughput.predict(setup_of(row), exclude=frozenset(gone))
    if p is None:
        return Result(row, None)
    return Result(row, p.images_per_sec, p.low, p.high)


def run(leave_gpu_out: bool = False) -> list[Result]:
    """Every calibration row, left out in turn."""
    return [predict_row(row, leave_gpu_out) for row in calibration.rows()]


def summary(results: list[Result]) -> dict[str, Any]:
    """Median and worst absolute error, rows predicted and rows without a prediction."""
    errors = [abs(r.error) for r in results if r.error is not None]
    return {
        "rows": len(results),
        "predicted": len(errors),
        "unpredicted": [r.row.id for r in results if r.error is None],
        "median_abs_error": statistics.median(errors) if errors else None,
        "worst_abs_error": max(errors) if errors else None,
        "within_band": sum(
            1
            for r in results
            if r.low is not None and r.high is not None and r.low <= r.row.images_per_sec <= r.high
        ),
    }


def run_measured(use_measured: bool = True) -> list[Result]:
    """Every gpu-check measured row (measured.csv) predicted without itself (``use_measured``
    False: without any measured row, as the model stood before them)."""
    from finetune.estimate.perf import measured

    out = []
    every = frozenset(r.id for r in measured.rows())
    for row in measured.rows():
        setup = throughput.Setup(
            network=row.network, gpu_model=row.gpu_model, precision=row.precision,
            batch_per_device=row.batch, image_size=row.image_size,
            compile=row.compile == "inductor", layout=row.layout,
        )  # fmt: skip
        p = throughput.predict(setup, exclude=frozenset({row.id}) if use_measured else every)
        out.append(Result(row, None) if p is None else Result(row, p.images_per_sec, p.low, p.high))
    return out
