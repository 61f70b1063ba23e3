"""The least-squares solve behind fit.py (numpy: imported only when a prediction is made):
each stack's four roofline coefficients from every observation's features and seconds, as
fit.py's docstring describes."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

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


Coefficients = tuple[float, float, float, float]  # 1/compute, 1/memory, instr/element, s/kernel


def coefficients(
    features: Sequence[Sequence[float]], seconds: Sequence[float], which: Sequence[int], n: int
) -> list[Coefficients]:
    """Each of the ``n`` stacks' coefficients, fitted to the rows (``which``: each row's stack)."""
    x = np.array(features, dtype=float).reshape(-1, 5)
    y = np.log(np.array(seconds, dtype=float))
    logs = _mix(n) @ _solve(x, y, np.array(which, dtype=int), n)
    out: list[Coefficients] = []
    for i in range(n):
        a, b, d, tau = (float(c) for c in FLOOR + np.exp(logs[P * i : P * i + P]))
        out.append((a, b, d, tau))
    return out


def seconds(coef: Coefficients, features: Sequence[float]) -> float:
    """One row's seconds per image under ``coef`` (roofline.seconds)."""
    return float(model(np.array([coef]), np.array([features], dtype=float))[0][0])


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
