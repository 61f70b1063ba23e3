"""Figures derived from a run's money (estimate.money): euros per epoch, SageMaker's managed-spot
saving, and the pre-launch estimate, which bills its planned seconds through the same
``money.euros`` as a finished run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from finetune.catalog.fx import Rate
from finetune.errors import DataError
from finetune.estimate import money


def sagemaker_spot_savings(billable_seconds: float, training_seconds: float) -> float:
    """SageMaker's managed-spot saving: 1 - BillableTimeInSeconds / TrainingTimeInSeconds."""
    if training_seconds <= 0:
        return 0.0
    return 1.0 - billable_seconds / training_seconds


def eur_per_epoch(total_eur: float | None, epochs: int) -> float | None:
    """Average euros per finished epoch; None for a run that finished none (or unknown euros)."""
    return total_eur / epochs if epochs > 0 and total_eur is not None else None


def training_seconds(images_per_epoch: int, epochs: int, images_per_sec: float) -> float:
    """Seconds to push ``epochs`` x ``images_per_epoch`` images through at ``images_per_sec``."""
    if images_per_sec <= 0:
        raise DataError(
            f"Cannot estimate time from a throughput of {images_per_sec} images/s.",
            "measure one run first, or pick a GPU with a reference figure.",
        )
    return images_per_epoch * epochs / images_per_sec


def spot_savings(m: money.Money) -> float | None:
    """The managed-spot saving of SageMaker lines (billable vs training seconds), else None."""
    spot = [
        ln
        for ln in m.lines
        if ln.charge.rule == money.SAGEMAKER and ln.charge.market == "spot"
        if ln.charge.training_seconds
    ]
    if not spot:
        return None
    billed = sum(ln.billed_seconds for ln in spot)
    return sagemaker_spot_savings(billed, sum(ln.charge.training_seconds or 0.0 for ln in spot))


@dataclass(frozen=True)
class CostEstimate:
    """A pre-launch estimate: how long, how much, and from which throughput figure."""

    images_per_sec: float
    throughput_source: str
    train_seconds: float
    billable_seconds: float
    eur: float
    money: money.Money


def estimate(
    *,
    images_per_epoch: int,
    epochs: int,
    images_per_sec: float,
    throughput_source: str,
    charge: money.Charge,
    rate: Rate,
    overhead_seconds: float = 0.0,
) -> CostEstimate:
    """Time and euros for a planned run: ``charge`` (instances, price, rule) running for the
    training time plus ``overhead_seconds`` (start-up and validation), billed by money.euros."""
    train = training_seconds(images_per_epoch, epochs, images_per_sec)
    running = math.ceil(train + max(overhead_seconds, 0.0))
    planned = money.Charge(**{**charge.to_dict(), "seconds": running})
    m = money.euros([planned], rate, estimate=True)
    if m.eur is None:  # the planned charge carries the quote's price, so this is a bug
        raise DataError(f"the planned charge for {charge.instance_type} has no price",
                        "report this: an estimate is made from a quoted price.")  # fmt: skip
    return CostEstimate(images_per_sec, throughput_source, train, m.billed_seconds, m.eur, m)
