"""A euro cap on the command line (--max-eur): a positive, finite number of euros.

One check for every flag that caps spending (launch and sweep), so they agree: zero is a cap
that nothing can run under (refused, never read as "no cap"), a negative or non-finite cap is
refused, and an options-model field of this type runs the same check.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

from finetune.errors import UsageError


def check_max_eur(value: float | None, option: str = "--max-eur") -> float | None:
    """``value`` when it is a usable cap (None: no cap); a UsageError naming ``option`` when
    it is zero, negative or not a finite number."""
    if value is None:
        return None
    try:
        eur = float(value)
    except (TypeError, ValueError):
        raise UsageError(
            f"{option} {value!r} is not a number of euros", f"write it like {option} 5 or 2.50."
        ) from None
    if not math.isfinite(eur):
        raise UsageError(
            f"{option} {value!r} is not a finite number of euros",
            f"give a cap like {option} 5, or drop {option} to run without a cap.",
        )
    if eur == 0:
        raise UsageError(
            f"{option} 0 caps spending at nothing: no run on AWS can start for 0 EUR",
            f"give a positive cap, e.g. {option} 5, or drop {option} to run without a cap.",
        )
    if eur < 0:
        raise UsageError(
            f"{option} {eur:g} is negative: a cap is the most a run may spend",
            f"give a positive cap, e.g. {option} 5, or drop {option} to run without a cap.",
        )
    return eur


def _validate(value: Any, info: ValidationInfo) -> Any:
    return check_max_eur(value, "--" + (info.field_name or "max_eur").replace("_", "-"))


# An options-model field that holds a --max-eur (None: no cap).
EuroCap = Annotated[float | None, BeforeValidator(_validate)]
