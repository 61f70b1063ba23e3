"""Measured history: finished runs' throughput, which replaces the performance model's
prediction (estimate/perf) for the cell it was measured in.

A cell is the network, the GPU model, the engine (which fixes the precision a recipe's
``auto`` trains at) and, where both sides record them, the batch per device and the image
size. The caller (estimate.estimator) passes the ledger's runs as ``Measurement`` data.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from finetune.estimate.perf.flops import network_key

__all__ = ["Measured", "Measurement", "from_history", "network_key"]


@dataclass(frozen=True)
class Measurement:
    """One finished run's steady-state throughput (all GPUs together), from the ledger."""

    model: str
    gpu_model: str
    gpus: int
    images_per_sec: float
    run_id: str = ""
    engine: str = ""  # "" where the run did not record it: matches any
    batch_per_device: int | None = None  # None: matches any
    image_size: int | None = None


@dataclass(frozen=True)
class Measured:
    """What the ledger says for a cell: images/s per device on one device (or the median
    total for exactly the device count asked), the runs' range, and which runs."""

    images_per_sec: float  # all devices together (exact device count) or per device
    low: float
    high: float
    devices: int  # the device count the runs had (1 when per-device)
    exact: bool  # measured at the device count asked: no scaling needed
    run_ids: tuple[str, ...]

    def describe(self) -> str:
        ids = ", ".join(r for r in self.run_ids if r) or "unnamed"
        return f"measured: median of {len(self.run_ids)} run(s) {ids}"


def _matches(
    m: Measurement,
    model: str,
    gpu_model: str,
    engine: str | None,
    batch: int | None,
    image_size: int | None,
) -> bool:
    net = network_key(model)  # a network the FLOP table lacks matches by its exact name
    return (
        (network_key(m.model) == net if net else m.model == model)
        and m.gpu_model == gpu_model
        and m.images_per_sec > 0
        and (not m.engine or not engine or m.engine == engine)
        and (m.batch_per_device is None or batch is None or m.batch_per_device == batch)
        and (m.image_size is None or image_size is None or m.image_size == image_size)
    )


def from_history(
    model: str,
    gpu_model: str,
    gpus: int,
    history: Iterable[Measurement],
    *,
    engine: str = "",
    batch_per_device: int | None = None,
    image_size: int | None = None,
) -> Measured | None:
    """The ledger's figure for this cell at ``gpus`` devices (exact), else per device from
    its runs on the fewest devices (the caller scales it); None when no run matches."""
    same = [
        m for m in history if _matches(m, model, gpu_model, engine, batch_per_device, image_size)
    ]
    if not same:
        return None
    exact = [m for m in same if m.gpus == gpus]
    if exact:
        rates = [m.images_per_sec for m in exact]
        return Measured(
            statistics.median(rates), min(rates), max(rates), gpus, True,
            tuple(m.run_id for m in exact),
        )  # fmt: skip
    fewest = min(m.gpus for m in same)
    runs = [m for m in same if m.gpus == fewest]
    rates = [m.images_per_sec / m.gpus for m in runs]
    return Measured(
        statistics.median(rates), min(rates), max(rates), fewest, False,
        tuple(m.run_id for m in runs),
    )  # fmt: skip
