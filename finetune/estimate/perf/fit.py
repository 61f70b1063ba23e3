"""The efficiencies of each software stack, fitted to every observation (observations.py)
not left out: per stack, its fraction of the tensor peak, of the bandwidth, of the issue rate,
and its seconds per kernel launched (roofline.Efficiency). Nothing is fitted per GPU.

One least-squares fit of log(predicted / observed seconds) over all rows at once. A stack's
four log-coefficients are the stacks' mean, plus its own scale (free, on the three roofs'),
plus a split pulled towards 0 (weight ``PULL``): a stack seen on GPUs of different balance
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

import numpy as np
import numpy.typing as npt

from finetune.estimate.perf import observations, roofline, stacks

Array = npt.NDArray[np.float64]
# a split of 1 (x e) from the mean costs a tenth of a row off by x e: chosen by leave-GPU-out
PULL = 0.1
# holds the stacks' mean where no stack says anything; the kernel cost's firmly at START's
# 20 us (eager dispatch + launch), so that only rows at small batches move a stack's from it
ANCHOR = np.array([1e-3, 1e-3, 1e-3, 10.0])
# each coefficient is FLOOR + exp(theta): 1 / compute efficiency (no stack beats the tensor
# peak on FLOPs counted exactly), 1 / memory efficiency and instructions per element (a fused
# stack moves fewer bytes than the eager count), seconds per kernel
FLOOR = np.array([1.0, 0.0, 0.0, 0.0])
START = (math.log(1.0), math.log(1.0), math.log(30.0), math.log(20e-6))
SCALED = np.array([1.0, 1.0, 1.0, 0.0])  # a stack's scale moves the three roofs' coefficients
P = len(START)  # parameters per stack


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
    x = np.array([o.work.features for o in obs], dtype=float).reshape(-1, 5)
    y = np.log(np.array([o.seconds for o in obs], dtype=float))
    which = np.array([index[o.stack] for o in obs], dtype=int)
    logs = _mix(len(keys)) @ _solve(x, y, which, len(keys))
    out = {}
    for s, i in index.items():
        coef = FLOOR + np.exp(logs[P * i : P * i + P])
        a, b, d, tau = (float(c) for c in coef)
        mine = [o for o in obs if o.stack == s]
        eff = roofline.Efficiency(1 / a, 1 / b, 1 / d, tau * 1e6)
        res = tuple(
            Residual(o.id, o.gpu, o.network, o.precision, o.batch,
                     math.log(o.seconds / float(model(coef[None, :],
                                                      np.array([o.work.features]))[0][0])))
            for o in mine
        )  # fmt: skip
        out[s] = StackFit(s, eff, frozenset(o.gpu for o in mine), tuple(o.id for o in mine),
                          res)  # fmt: skip
    return Fitted(out)


def model(coef: Array, x: Array) -> tuple[Array, Array]:
    """Seconds per image (roofline.seconds) for rows of coefficients (1 / compute, 1 /
    memory, instructions per element, seconds per kernel) and of Work.features, and their
    derivative by each coefficient (the features the coefficient multiplies)."""
    grad = np.stack([x[:, 0], x[:, 1] + x[:, 2], x[:, 3], x[:, 4]], axis=1)
    return (coef * grad).sum(axis=1), grad


def _mix(n: int) -> Array:
    """Parameters [mean (4), scale per stack (n), split per stack (4n)] -> each stack's four
    log-coefficients: mean + scale (the three roofs', not the kernel cost) + split."""
    m = np.zeros((P * n, P + (P + 1) * n))
    for k in range(n):
        rows = slice(P * k, P * k + P)
        m[rows, :P] = np.eye(P)
        m[rows, P + k] = SCALED
        m[rows, P + n + P * k : P + n + P * k + P] = np.eye(P)
    return m


def _solve(x: Array, y: Array, which: npt.NDArray[np.int_], n: int) -> Array:
    """Levenberg-Marquardt: residuals log(sum_j (FLOOR_j + exp(l_j)) x_j) - log(observed)
    per row, then the pulls on the splits and weak anchors on the mean and the scales."""
    mix = _mix(n)
    size = P + (P + 1) * n
    per_row = mix.reshape(n, P, size)[which]  # d log-coefficient / d parameter, per row
    fixed = np.zeros(((P + 1) * n + P, size))  # splits pulled to 0, scales and mean anchored
    fixed[: P * n, P + n :] = math.sqrt(PULL) * np.eye(P * n)
    fixed[P * n : (P + 1) * n, P : P + n] = ANCHOR[0] * np.eye(n)
    fixed[(P + 1) * n :, :P] = np.diag(ANCHOR)
    offset = np.concatenate([np.zeros((P + 1) * n), ANCHOR * np.array(START)])
    theta = np.concatenate([np.array(START), np.zeros((P + 1) * n)])

    def residuals(t: Array) -> tuple[Array, Array]:
        grow = np.exp((mix @ t).reshape(n, P)[which])
        pred, grad = model(FLOOR + grow, x)
        jac = np.einsum("ij,ijp->ip", grow * grad / pred[:, None], per_row)
        r = np.concatenate([np.log(pred) - y, fixed @ t - offset])
        return r, np.vstack([jac, fixed])

    damping = 1e-3
    r, jac = residuals(theta)
    for _ in range(300):
        step = np.linalg.solve(jac.T @ jac + damping * np.eye(size), -jac.T @ r)
        r_new, jac_new = residuals(theta + step)
        if r_new @ r_new < r @ r:
            theta, r, jac, damping = theta + step, r_new, jac_new, damping / 3
            if float(np.abs(step).max()) < 1e-7:
                break
        else:
            damping *= 4
            if damping > 1e8:
                break
    return np.asarray(theta, dtype=np.float64)
