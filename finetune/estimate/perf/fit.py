"""The efficiencies of each software stack, fitted to every observation (observations.py)
not left out: per stack, its fraction of the tensor peak, of the bandwidth, of the
instruction issue rate, and its seconds per kernel (roofline.Efficiency). None per GPU.

One least-squares fit of log(predicted / observed seconds) over all rows at once. A stack's
four log-coefficients are the stacks' mean, plus its own scale (free, on the three roofs'),
plus a split pulled towards 0 (weight ``solver.PULL``): a stack seen on GPUs of different balance
(peak : bandwidth : issue) fixes all four; a stack seen on one GPU fixes its scale, and the
pull splits it as the other stacks do. A stack with no row at all takes the median of its
nearest stacks (stacks.GROUPS). On a GPU where the stack has rows, their residuals correct
the roofline for that GPU only (``Fitted.learned``). Why these weights:
docs/decisions/020-roofline-model.md.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass

from finetune.estimate.perf import observations, roofline, stacks


@dataclass(frozen=True)
class Residual:
    """One row of a stack: what the fitted roofline misses it by."""

    id: str
    gpu: str
    network: str
    precision: str
    batch: int
    log_ratio: float  # log(observed / roofline seconds)


@dataclass(frozen=True)
class StackFit:
    """One stack's efficiencies and the rows that taught them."""

    stack: stacks.Stack
    efficiency: roofline.Efficiency
    gpus: frozenset[str]
    ids: tuple[str, ...]
    residuals: tuple[Residual, ...] = ()


@dataclass(frozen=True)
class Learned:
    """What a prediction uses: the efficiencies, how near their rows are, what taught them."""

    efficiency: roofline.Efficiency
    level: int  # 1 the stack has rows on this GPU, 2 on other GPUs only, 3 no rows at all
    stack: stacks.Stack
    taught_by: tuple[str, ...]
    note: str
    correction: float = 1.0  # x seconds: what the stack's nearest rows on this GPU measured


@dataclass(frozen=True)
class Fitted:
    by_stack: dict[stacks.Stack, StackFit]

    def learned(
        self, stack: stacks.Stack, gpu: str, network: str = "", precision: str = "",
        batch: int = 0,
    ) -> Learned | None:  # fmt: skip
        """The efficiencies for ``stack`` on ``gpu`` (gpu_peaks.csv's model) -- on a GPU
        where the stack has rows, with what its nearest rows there (``network``,
        ``precision`` class, ``batch``) say the roofline misses; None when nothing was
        fitted at all."""
        own = self.by_stack.get(stack)
        if own is not None:
            mine = [r for r in own.residuals if r.gpu == gpu]
            if not mine:
                note = f"stack {stack}: fitted to {len(own.ids)} row(s) on " + ", ".join(
                    sorted(own.gpus)
                )
                return Learned(own.efficiency, 2, stack, own.ids, note)
            closest = _nearest(mine, network, precision, batch)
            correction = math.exp(statistics.median(r.log_ratio for r in closest))
            note = (f"stack {stack}: fitted to {len(own.ids)} row(s), {len(mine)} on this GPU; "
                    f"x {1 / correction:.3f} as its nearest there measured "
                    f"({', '.join(r.id for r in closest[:3])})")  # fmt: skip
            return Learned(own.efficiency, 1, stack, own.ids, note, correction)
        for label, near in stacks.GROUPS:
            group = [f for s, f in self.by_stack.items() if near(stack, s)]
            if group:
                eff = _median(group)
                ids = tuple(i for f in group for i in f.ids)
                note = (f"stack {stack}: no row; the median of {len(group)} stack(s) of "
                        f"{label} ({', '.join(str(f.stack) for f in group[:3])})")  # fmt: skip
                return Learned(eff, 3, stack, ids, note)
        return None


def _nearest(rows: list[Residual], network: str, precision: str, batch: int) -> list[Residual]:
    """The rows of the same network and precision class (else precision class, else any)
    whose batch is within 2x of the nearest batch to ``batch``."""
    same = [r for r in rows if (r.network, r.precision) == (network, precision)]
    pick = same or [r for r in rows if r.precision == precision] or rows
    if batch <= 0:
        return pick

    def gap(r: Residual) -> float:
        return abs(math.log(r.batch / batch))

    best = min(gap(r) for r in pick)
    return [r for r in pick if gap(r) <= best + math.log(2)]


def _median(group: list[StackFit]) -> roofline.Efficiency:
    """The median of each coefficient the time is multiplied by (1 / efficiency, us)."""

    def med(attr: str, power: int) -> float:
        return float(statistics.median(getattr(f.efficiency, attr) ** power for f in group))

    return roofline.Efficiency(1 / med("compute", -1), 1 / med("memory", -1),
                               1 / med("issue", -1), med("kernel_us", 1))  # fmt: skip


@functools.lru_cache(maxsize=512)
def fitted(exclude: frozenset[str] = frozenset()) -> Fitted:
    """The stacks' efficiencies from every observation not in ``exclude``."""
    obs = observations.observations(exclude)
    keys = sorted({o.stack for o in obs})
    index = {s: i for i, s in enumerate(keys)}
    from finetune.estimate.perf import solver  # deferred: numpy, when a prediction is made

    which = [index[o.stack] for o in obs]
    coefs = solver.coefficients([o.work.features for o in obs], [o.seconds for o in obs],
                                which, len(keys))  # fmt: skip
    out = {}
    for s, i in index.items():
        a, b, d, tau = coefs[i]
        mine = [o for o in obs if o.stack == s]
        eff = roofline.Efficiency(1 / a, 1 / b, 1 / d, tau * 1e6)
        res = tuple(
            Residual(o.id, o.gpu, o.network, o.precision, o.batch,
                     math.log(o.seconds / solver.seconds(coefs[i], o.work.features)))
            for o in mine
        )  # fmt: skip
        out[s] = StackFit(s, eff, frozenset(o.gpu for o in mine), tuple(o.id for o in mine),
                          res)  # fmt: skip
    return Fitted(out)
