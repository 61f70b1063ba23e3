"""The runtime cap of a cloud run without --max-runtime: one rule for every cloud backend
(SageMaker's MaxRuntimeInSeconds, EC2's dead-man deadline), from the plan's estimate."""

from __future__ import annotations

import math

from finetune.report.text import duration

# the estimate's slow end x RUNTIME_MARGIN: a run as estimated is never cut short, a hung one
# stops within about twice its cost (docs/decisions/040-cloud-runtime-cap.md)
RUNTIME_MARGIN = 1.5
RUNTIME_FLOOR_S = 3600
RUNTIME_FALLBACK_S = 6 * 3600


def default_runtime(plan) -> tuple[int, str]:
    """(seconds, why) of the runtime cap a cloud run of ``plan`` gets without --max-runtime."""
    est = getattr(plan, "estimate", None)
    slow = (est.seconds_high or est.seconds) if est is not None else None
    if not slow:
        return RUNTIME_FALLBACK_S, "default without an estimate; --max-runtime to change"
    seconds = max(RUNTIME_FLOOR_S, math.ceil(slow * RUNTIME_MARGIN / 900) * 900)
    return seconds, (
        f"{RUNTIME_MARGIN:g} x the estimate's slow end ({duration(slow)}), at least "
        f"{duration(RUNTIME_FLOOR_S)}; --max-runtime to change"
    )
