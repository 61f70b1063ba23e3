"""Figures derived from a run's money (estimate.money): euros per epoch and SageMaker's
managed-spot saving."""

from __future__ import annotations

from finetune.estimate import money


def sagemaker_spot_savings(billable_seconds: float, training_seconds: float) -> float:
    """SageMaker's managed-spot saving: 1 - BillableTimeInSeconds / TrainingTimeInSeconds."""
    if training_seconds <= 0:
        return 0.0
    return 1.0 - billable_seconds / training_seconds


def eur_per_epoch(total_eur: float | None, epochs: int) -> float | None:
    """Average euros per finished epoch; None for a run that finished none (or unknown euros)."""
    return total_eur / epochs if epochs > 0 and total_eur is not None else None


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
