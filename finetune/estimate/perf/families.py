"""The family rule of the performance model: a network whose family (flops.family:
convnext, vit, swin, ...) no calibration row measured takes the MFU its GPU reaches on the
networks that have rows (mfu.py), charged at its own counted FLOPs, with its band widened by
a further +-FAMILY_MARGIN and a basis line saying so (model.predict applies it)."""

from __future__ import annotations

import functools

from finetune.estimate.perf import calibration, flops

FAMILY_MARGIN = 0.25  # further +- band for a family without any calibration row


@functools.cache
def calibrated_families() -> frozenset[str]:
    """The model families with at least one calibration row (any kind, precision, GPU)."""
    return frozenset(f for row in calibration.rows() if (f := flops.family(row.network)))


def uncalibrated_family(network: str) -> bool:
    """True for a counted network whose family no calibration row measured."""
    fam = flops.family(network)
    return fam is not None and fam not in calibrated_families()


def family_note(network: str) -> str:
    """The basis line of the family rule (see the module docstring)."""
    return (
        f"no calibration row of the {flops.family(network)} family: the MFU measured on other "
        f"networks carries over at {flops.network_key(network)}'s own FLOPs; band widened by "
        f"a further +-{FAMILY_MARGIN:.0%}"
    )
