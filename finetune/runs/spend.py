"""Spend while a run goes: the euros so far and the projected total, and the one budget rule.

Euros so far are the run's charges (what its backend reported; an attempt still open runs on
to now) billed by estimate.money.euros -- the one money function `runs show` and `cost-report`
use. The projected total adds the time still to go at the price being paid: from the share
of training done (epochs and steps) where that is known, else from the launch estimate's
planned seconds. Projecting from the share done counts the start-up as if it recurred, so
early projections err high -- the safe side for a budget.

``budget_seconds`` is THE budget rule: the longest further running time a --max-eur leaves
once the euros spent are paid, through money.affordable_seconds. SageMaker's MaxRuntime and
EC2's dead-man deadline are both that figure (backends clamp it to their own limits), and
``over_budget`` is the same rule applied while the run goes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from finetune.catalog import fx
from finetune.estimate import money
from finetune.runs.charges import charges_of
from finetune.runs.run import Run

FINAL = ("completed", "failed", "stopped", "interrupted")


@dataclass(frozen=True)
class Spend:
    """Euros so far and the projected total for one run (None: a price is unknown)."""

    eur: float | None
    projected: float | None
    basis: str  # how the projection was made

    def text(self) -> str:
        """'EUR 0.12 so far, ~0.40 projected' (the projection left out when unknown)."""
        so_far = "EUR ?" if self.eur is None else f"EUR {self.eur:.2f}"
        if self.projected is None or self.projected == self.eur:
            return f"{so_far} so far" if self.projected is None else so_far
        return f"{so_far} so far, ~{self.projected:.2f} projected"


def live_charges(run: Run, now: float | None = None) -> list[money.Charge]:
    """The run's charges, an attempt still open (started, not ended, the run not final)
    running on to ``now``: a backend records its seconds when it reports, not every second."""
    now = time.time() if now is None else now
    out = []
    for c in charges_of(run):
        if run.status not in FINAL and c.ended_at is None:
            if c.started_at is not None:
                c = replace(c, seconds=max(c.seconds, now - c.started_at))
            elif run.started_at is not None:  # made from the run's own times: its clock
                c = replace(c, seconds=max(now - run.started_at, 0.0))
        out.append(c)
    return out


def spend(run: Run, now: float | None = None, done: float | None = None) -> Spend | None:
    """Euros so far and projected for ``run`` (``done``: the share of training finished,
    0-1); None for a run nothing bills (this machine)."""
    charges = live_charges(run, now)
    if not charges or all(c.rule == money.FREE for c in charges):
        return None
    rate = fx.eur_rate()
    so_far = money.euros(charges, rate).eur
    if run.status in FINAL:
        return Spend(so_far, so_far, "final")
    last = charges[-1]
    left, basis = _seconds_left(run, last.seconds, done)
    if left is None:
        return Spend(so_far, None, basis)
    ahead = [*charges[:-1], replace(last, seconds=last.seconds + left)]
    return Spend(so_far, money.euros(ahead, rate).eur, basis)


def _seconds_left(run: Run, elapsed: float, done: float | None) -> tuple[float | None, str]:
    if done is not None and 0 < done <= 1:
        return elapsed * (1 - done) / done, f"{done:.0%} of training done in {elapsed:.0f} s"
    planned = (run.plan.get("estimate") or {}).get("seconds")
    if planned:
        return max(planned - elapsed, 0.0), f"the launch estimate's {planned:.0f} s"
    return None, "no progress and no launch estimate to project from"


def budget_seconds(max_eur: float, spent: float, charge: money.Charge, rate) -> int | None:
    """THE budget rule: how many more seconds of ``charge``'s instances ``max_eur`` pays for
    once ``spent`` euros are paid (None: no price). MaxRuntime and the dead-man deadline."""
    return money.affordable_seconds(max_eur - spent, charge, rate)


def over_budget(s: Spend | None, max_eur: float | None) -> str | None:
    """Why the run must stop now (its projected total passes ``max_eur``), or None."""
    if s is None or max_eur is None or s.projected is None or s.projected <= max_eur:
        return None
    return (
        f"stopped with a checkpoint: the projected total ~EUR {s.projected:.2f} ({s.basis}) "
        f"would pass --max-eur {max_eur:g} (EUR {s.eur or 0:.2f} spent)"
    )


def done_share(epochs_done: int, total_epochs: int, batch: int = 0, steps: int = 0) -> float:
    """The share of training finished after ``epochs_done`` epochs and ``batch`` of ``steps``."""
    if total_epochs <= 0:
        return 0.0
    part = batch / steps if steps else 0.0
    return min((epochs_done + part) / total_epochs, 1.0)
