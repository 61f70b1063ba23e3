"""Stage 3 of an estimate: how long the run keeps its instances, as a band -- the training
time at the throughput's point and ends, plus start-up, plus (spot) the expected
interruptions' lost work."""

from __future__ import annotations

import math
from dataclasses import dataclass

from finetune.catalog import spot
from finetune.errors import DataError
from finetune.estimate.request import EstimateRequest
from finetune.estimate.throughput import Throughput


@dataclass(frozen=True)
class Duration:
    """Seconds each instance runs: at the point throughput and at its band's ends."""

    seconds: int
    fastest: int  # at the band's high throughput
    slowest: int  # at its low throughput
    overhead: float  # start-up, counted in each
    interruptions: spot.Interruptions | None = None  # spot: expected lost work, in each


def training_seconds(images_per_epoch: int, epochs: int, images_per_sec: float) -> float:
    """Seconds to push ``epochs`` x ``images_per_epoch`` images through at ``images_per_sec``."""
    if images_per_sec <= 0:
        raise DataError(
            f"Cannot estimate time from a throughput of {images_per_sec} images/s.",
            "measure one run first, or pick a GPU with a reference figure.",
        )
    return images_per_epoch * epochs / images_per_sec


def duration(request: EstimateRequest, tp: Throughput) -> Duration:
    """The run's seconds at ``tp``; on spot with a checkpoint interval, the expected
    interruptions' lost work added (catalog.spot.interruption_overhead)."""
    images, epochs, overhead = request.images_per_epoch, request.epochs, request.overhead_seconds
    lost = None
    if request.spot and request.checkpoint_interval_s:
        work = training_seconds(images, epochs, tp.images_per_sec) + overhead
        lost = spot.interruption_overhead(work, request.hosts, request.checkpoint_interval_s)
    extra = max(overhead, 0.0) + (lost.seconds if lost else 0.0)

    def at(rate: float) -> int:
        return math.ceil(training_seconds(images, epochs, rate) + extra)

    return Duration(at(tp.images_per_sec), at(tp.high), at(tp.low), overhead, lost)
