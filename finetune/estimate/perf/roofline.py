"""The step time of one training image on one GPU: a roofline per layer class, summed.

    seconds per image =  matmul FLOPs / (tensor peak x e_compute)
                       + (matmul + elementwise bytes) / (bandwidth x e_memory)
                       + elementwise elements x instructions each / instruction issue rate
                       + (weight + optimizer bytes per step) / (bandwidth x e_memory) / batch
                       + kernels per step x kernel_us / batch

Each term is what its class needs of one roof (gpus.Roofs) at that roof's full speed,
divided by an efficiency of the software stack (fit.py), never of the GPU. The terms add:
a framework runs its kernels one after another, and each kernel is mostly one roof's
(docs/decisions/020-roofline-model.md: summed beat max() in the backtest).
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.estimate.perf.gpus import Roofs
from finetune.estimate.perf.traffic import Traffic

# the per-image terms, in the order they are shown; which roof and efficiency each uses
TERMS = ("matmul compute", "matmul bytes", "elementwise bytes", "elementwise issue",
         "update bytes", "kernel overhead")  # fmt: skip
BOUNDS = {"matmul compute": "compute", "matmul bytes": "memory", "elementwise bytes": "memory",
          "update bytes": "memory", "elementwise issue": "issue",
          "kernel overhead": "overhead"}  # fmt: skip


@dataclass(frozen=True)
class Work:
    """Seconds per image of each term at 100 % of its roof (kernel overhead: kernels per
    image, to be multiplied by seconds per kernel)."""

    compute: float
    matmul_bytes: float
    elementwise_bytes: float
    issue: float
    update: float
    kernels: float

    @property
    def features(self) -> tuple[float, float, float, float, float]:
        """(compute, matmul bytes, other bytes, issue, kernels): what the fit reads."""
        other = self.elementwise_bytes + self.update
        return self.compute, self.matmul_bytes, other, self.issue, self.kernels


@dataclass(frozen=True)
class Efficiency:
    """One software stack's fraction of each roof, and its cost per kernel launched."""

    compute: float
    memory: float
    issue: float
    kernel_us: float

    def describe(self) -> str:
        return (
            f"{self.compute:.0%} of the tensor peak, {self.memory:.0%} of the bandwidth on "
            f"the eager byte count, {1 / self.issue:.0f} instructions per elementwise element, "
            f"{self.kernel_us:.1f} us per kernel"
        )


def work(t: Traffic, roofs: Roofs, batch: int) -> Work:
    """``t`` on a GPU with ``roofs`` at ``batch`` images per step, per image."""
    bandwidth = roofs.memory_gbps * 1e9
    return Work(
        compute=t.matmul_gflops * 1e9 / (roofs.tensor_tflops * 1e12),
        matmul_bytes=t.matmul_mb * 1e6 / bandwidth,
        elementwise_bytes=t.elementwise_mb * 1e6 / bandwidth,
        issue=t.elementwise_melems * 1e6 / (roofs.issue_tops * 1e12),
        update=(t.weights_mb + t.optimizer_mb) * 1e6 / bandwidth / batch,
        kernels=t.kernels / batch,
    )


def terms(w: Work, e: Efficiency) -> dict[str, float]:
    """Seconds per image of each term (TERMS) for stack efficiencies ``e``."""
    return {
        "matmul compute": w.compute / e.compute,
        "matmul bytes": w.matmul_bytes / e.memory,
        "elementwise bytes": w.elementwise_bytes / e.memory,
        "elementwise issue": w.issue / e.issue,
        "update bytes": w.update / e.memory,
        "kernel overhead": w.kernels * e.kernel_us * 1e-6,
    }


def seconds(w: Work, e: Efficiency) -> float:
    """Seconds per image on one device."""
    return sum(terms(w, e).values())


def bound(parts: dict[str, float]) -> str:
    """The roof the step spends most on: compute, memory, issue or overhead."""
    by: dict[str, float] = {}
    for name, s in parts.items():
        by[BOUNDS[name]] = by.get(BOUNDS[name], 0.0) + s
    return max(by, key=lambda k: by[k])
