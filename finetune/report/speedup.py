"""Scaling: speedup and efficiency against the 1-GPU baseline, and time/euros to an accuracy.

speedup(N) = throughput(N) / throughput(1 device) and efficiency(N) = speedup(N) / N, both on
steady-state throughput (warm-up excluded), for N > 1 only: a 1-device run is a baseline, not
a measurement of scaling (compared with itself it would read 1.00x, 100 %). A baseline is a
1-device run of the same recipe, dataset, model, engine, GPU model, batch per device and image
size: comparing 8 K80s with one V100, or batch 32 with batch 16, says nothing about scaling.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from finetune.contracts.metrics import EpochMetrics
from finetune.errors import DataError, UsageError
from finetune.report.runfacts import RunFacts


def speedup(throughput_n: float, throughput_1: float) -> float:
    """How many times faster N GPUs process images than one."""
    if throughput_1 <= 0:
        raise DataError(
            f"The 1-GPU baseline throughput must be positive (got {throughput_1}).",
            "check that the baseline run recorded its images/s metrics.",
        )
    return throughput_n / throughput_1


def efficiency(speedup_n: float, n: int) -> float:
    """Speedup per GPU: 1.0 is perfect linear scaling."""
    if n < 1:
        raise DataError(f"A run needs at least one GPU (got {n}).", "check the run record.")
    return speedup_n / n


def baseline_key(run: RunFacts) -> tuple:
    """Runs comparable for scaling: same recipe, dataset, model, engine, GPU model, batch per
    device and image size."""
    return (
        run.recipe,
        run.dataset,
        run.model,
        run.engine,
        run.gpu_model,
        run.batch_per_device,
        run.image_size,
    )


def baselines(runs: list[RunFacts]) -> dict[tuple, tuple[float, list[str]]]:
    """Median 1-device throughput (and the run ids behind it) per comparable group, over
    completed runs."""
    groups: dict[tuple, list[tuple[RunFacts, float]]] = {}  # (run, its images/s)
    for run in runs:
        if run.devices == 1 and run.images_per_sec and run.status == "completed":
            groups.setdefault(baseline_key(run), []).append((run, run.images_per_sec))
    return {
        key: (statistics.median(ips for _, ips in group), [r.run_id for r, _ in group])
        for key, group in groups.items()
    }


@dataclass(frozen=True)
class Scaling:
    """One run's scaling figures; None where there is no baseline or no throughput."""

    run_id: str
    gpus: int
    images_per_sec: float | None
    baseline_images_per_sec: float | None
    baseline_runs: tuple[str, ...]
    speedup: float | None
    efficiency: float | None
    wall_speedup: float | None = None  # the baseline's wall time / this run's, start-up included


def scaling(runs: list[RunFacts], pool: Sequence[RunFacts] = ()) -> list[Scaling]:
    """Speedup (steady-state images/s) and efficiency of every run with N > 1 devices against
    its 1-device baseline, and the wall-clock speedup beside it
    (from ``runs`` and ``pool``: e.g. the whole ledger when one run is reported), in input
    order; 1-device runs get none."""
    base = baselines([*runs, *pool])
    walls = {r.run_id: r.wall_seconds for r in [*runs, *pool]}
    out = []
    for run in runs:
        ips = run.images_per_sec
        b_ips, b_ids = base.get(baseline_key(run), (None, []))
        if run.devices <= 1:
            b_ips, b_ids = None, []
        s = speedup(ips, b_ips) if ips and b_ips else None
        e = efficiency(s, run.devices) if s is not None else None
        base_walls = [walls[i] for i in b_ids if walls.get(i)]
        w = (
            statistics.median(base_walls) / run.wall_seconds
            if base_walls and run.wall_seconds
            else None
        )
        out.append(Scaling(run.run_id, run.devices, ips, b_ips, tuple(b_ids), s, e, w))
    return out


def check_target(target: float) -> float:
    """A target accuracy is a fraction in (0, 1]: 0.865 means 86.5 % top-1."""
    if not 0 < target <= 1:
        raise UsageError(
            f"Target accuracy {target} is not a fraction between 0 and 1.",
            "give it as a fraction, e.g. --target-acc 0.865 for 86.5 %.",
        )
    return target


def time_to_accuracy(epochs: list[EpochMetrics] | tuple, target: float) -> float | None:
    """Training seconds until the end of the first epoch whose val_acc reaches ``target``."""
    check_target(target)
    elapsed = 0.0
    for e in sorted(epochs, key=lambda e: e.epoch):
        elapsed += e.epoch_seconds
        if e.val_acc is not None and e.val_acc >= target:
            return elapsed
    return None


def eur_to_accuracy(run: RunFacts, target: float) -> float | None:
    """Euros spent until ``target`` was reached: the run's bill prorated by training time.

    Prorating spreads start-up and evaluation overhead evenly over the epochs, so the figure
    never exceeds the run's total and is exact when overhead is negligible.
    """
    reached = time_to_accuracy(run.epochs, target)
    total = sum(e.epoch_seconds for e in run.epochs)
    eur = run.money.eur
    if reached is None or total <= 0 or eur is None:
        return None
    return eur * reached / total
