"""Money, computed in one place: billable seconds x instances x hourly USD / 3600 / rate.

EC2 bills Linux instances per second with a 60-second minimum. SageMaker bills
BillableTimeInSeconds per instance; with managed spot, that is already reduced, and the
saving is 1 - billable / training time. Rates are ECB quotes: USD per 1 EUR.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from finetune.errors import DataError
from finetune.report.model import RunFacts

EC2_MINIMUM_SECONDS = 60


def ec2_billable_seconds(running_seconds: float) -> int:
    """Seconds EC2 bills for an instance that ran ``running_seconds`` (0 if it never ran)."""
    if running_seconds <= 0:
        return 0
    return max(EC2_MINIMUM_SECONDS, math.ceil(running_seconds))


def cost_eur(
    billable_seconds: float, instance_count: int, hourly_usd: float, usd_per_eur: float
) -> float:
    """Euros for ``instance_count`` instances billed ``billable_seconds`` each at ``hourly_usd``."""
    if usd_per_eur <= 0:
        raise DataError(
            f"The exchange rate must be positive (got {usd_per_eur} USD per EUR).",
            "run `finetune prices refresh` to fetch the ECB reference rate.",
        )
    if billable_seconds < 0 or instance_count < 0 or hourly_usd < 0:
        raise DataError(
            "Billable seconds, instance count and hourly price cannot be negative "
            f"(got {billable_seconds}, {instance_count}, {hourly_usd}).",
            "check the run record; the ledger may be corrupt.",
        )
    return billable_seconds * instance_count * hourly_usd / 3600.0 / usd_per_eur


def sagemaker_spot_savings(billable_seconds: float, training_seconds: float) -> float:
    """SageMaker's managed-spot saving: 1 - BillableTimeInSeconds / TrainingTimeInSeconds."""
    if training_seconds <= 0:
        return 0.0
    return 1.0 - billable_seconds / training_seconds


def eur_per_epoch(total_eur: float, epochs: int) -> float | None:
    """Average euros per finished epoch; None for a run that finished none."""
    return total_eur / epochs if epochs > 0 else None


def training_seconds(images_per_epoch: int, epochs: int, images_per_sec: float) -> float:
    """Seconds to push ``epochs`` x ``images_per_epoch`` images through at ``images_per_sec``."""
    if images_per_sec <= 0:
        raise DataError(
            f"Cannot estimate time from a throughput of {images_per_sec} images/s.",
            "measure one run first, or pick a GPU with a reference figure.",
        )
    return images_per_epoch * epochs / images_per_sec


def run_cost_eur(run: RunFacts) -> float:
    """What ``run`` cost in euros (0 for local runs, which carry no hourly price)."""
    return cost_eur(run.billable_seconds, run.instance_count, run.hourly_usd, run.usd_per_eur)


def run_spot_savings(run: RunFacts) -> float | None:
    """The SageMaker managed-spot saving of ``run``, None when it does not apply."""
    if run.backend != "sagemaker" or not run.spot or not run.training_seconds:
        return None
    return sagemaker_spot_savings(run.billable_seconds, run.training_seconds)


@dataclass(frozen=True)
class CostEstimate:
    """A pre-launch estimate: how long, how much, and from which throughput figure."""

    images_per_sec: float
    throughput_source: str
    train_seconds: float
    billable_seconds: float
    eur: float

    @property
    def eur_per_hour(self) -> float:
        return self.eur / self.billable_seconds * 3600 if self.billable_seconds else 0.0


def estimate(
    *,
    images_per_epoch: int,
    epochs: int,
    images_per_sec: float,
    throughput_source: str,
    instance_count: int,
    hourly_usd: float,
    usd_per_eur: float,
    backend: str = "ec2",
    overhead_seconds: float = 0.0,
) -> CostEstimate:
    """Time and euros for a planned run; ``overhead_seconds`` covers start-up and validation."""
    train = training_seconds(images_per_epoch, epochs, images_per_sec)
    running = train + max(overhead_seconds, 0.0)
    billable = ec2_billable_seconds(running) if backend == "ec2" else math.ceil(running)
    eur = cost_eur(billable, instance_count, hourly_usd, usd_per_eur)
    return CostEstimate(images_per_sec, throughput_source, train, billable, eur)
