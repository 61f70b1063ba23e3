"""The runtime cap of a cloud run without --max-runtime: one rule for every cloud backend
(SageMaker's MaxRuntimeInSeconds, EC2's dead-man deadline), from the plan's estimate."""

from __future__ import annotations

from finetune.report.text import duration

# The runtime cap of a cloud run without --max-runtime, the same on every cloud backend: the
# slow end of the plan's estimate (its band at the lower throughput, start-up included) x
# RUNTIME_MARGIN, rounded up to a quarter hour and at least RUNTIME_FLOOR_S. Long enough that
# a run going as the estimate says (or half as fast again) is never cut short; short enough
# that a hung run stops within about twice its expected cost. A plan without an estimate
# (throughput unknown) gets RUNTIME_FALLBACK_S.
RUNTIME_MARGIN = 1.5
RUNTIME_FLOOR_S = 3600
RUNTIME_FALLBACK_S = 6 * 3600


def default_runtime(plan) -> tuple[int, str]:
    """(seconds, why) of the runtime cap a cloud run of ``plan`` gets without --max-runtime."""
    import math

    est = getattr(plan, "estimate", None)
    slow = (est.seconds_high or est.seconds) if est is not None else None
    if not slow:
        return RUNTIME_FALLBACK_S, "default without an estimate; --max-runtime to change"
    seconds = max(RUNTIME_FLOOR_S, math.ceil(slow * RUNTIME_MARGIN / 900) * 900)
    return seconds, (
        f"{RUNTIME_MARGIN:g} x the estimate's slow end ({duration(slow)}), at least "
        f"{duration(RUNTIME_FLOOR_S)}; --max-runtime to change"
    )
