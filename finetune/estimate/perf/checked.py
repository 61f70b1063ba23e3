"""A figure the model is checked against (a calibration row or a gpu-check row), the setup
it was measured in, and the model's prediction of it with some rows left out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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


def result(row: Published, setup: throughput.Setup, gone: frozenset[str]) -> Result:
    p = throughput.predict(setup, exclude=gone)
    if p is None:
        return Result(row, None)
    return Result(row, p.images_per_sec, p.low, p.high, p.level)
