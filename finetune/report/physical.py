"""How far a run is from the hardware (the DAWNBench analysis's question): achieved TFLOP/s
from images/s and the network's training FLOPs per image, as a share of the GPU's peak, and
what the same run would have cost at 100 % of peak.

Training FLOPs per image = 3 x (forward multiply-adds x 2): forward, and a backward pass of
about twice the forward. Forward multiply-adds at 224 px are torchvision's model table
("GFLOPS", which counts multiply-adds): ResNet-18 1.81, -34 3.66, -50 4.09, -101 7.80, -152
11.51; they scale with the image area. Other networks (ConvNeXt, ViT, ...) take the
performance model's counted table (finetune/estimate/perf/train_flops.csv). The GPU peak comes
from the engines' telemetry (``peak_tflops`` in the metrics events) or the sourced table
finetune/catalog/gpu_peaks.csv when this version has one; otherwise it is "n/a", never a
guess.
"""

from __future__ import annotations

import re
import statistics
from functools import lru_cache

from finetune.catalog import gpu_peaks
from finetune.estimate.perf import flops

FORWARD_GMACS_224 = {18: 1.81, 34: 3.66, 50: 4.09, 101: 7.80, 152: 11.51}


def train_gflop_per_image(model: str, image_size: int | None) -> float | None:
    """Training GFLOP for one image of ``model`` at ``image_size`` px (None: unknown net)."""
    m = re.search(r"(?<![a-z_])resnet[-_]?(\d+)", model.lower())  # not wide_resnet50_2
    gmacs = FORWARD_GMACS_224.get(int(m.group(1))) if m else None
    if gmacs is None:  # the torch engine's other networks: the catalog's counted table
        count = flops.lookup(model, image_size or 224)
        return count.gflops if count is not None else None
    return 6.0 * gmacs * ((image_size or 224) / 224.0) ** 2


@lru_cache(maxsize=1)
def _peak(gpu_model: str | None) -> tuple[float, str] | None:
    """(dense peak TFLOP/s of one GPU, where from) from the catalog's sourced table: bf16,
    else fp16, else fp32 (K80 and M60 have no fast half precision). The catalog names AWS's
    GPUs by family (V100, A100, H100); the table names the part AWS fits (V100 SXM2,
    A100 40GB, H100 SXM): a family takes its first row."""
    if not gpu_model:
        return None
    rows = gpu_peaks.peaks()
    found = next((r for r in rows if r.model == gpu_model), None) or next(
        (r for r in rows if r.model.split()[0] == gpu_model), None
    )
    if found is None:
        return None
    for precision in ("bf16", "fp16", "fp32"):
        value = found.tflops(precision)
        if value:
            return value, f"{found.model} dense {precision}, {found.source}"
    return None


def peak_tflops(run) -> tuple[float | None, str]:
    """(peak TFLOP/s of the run's GPUs together, where from) or (None, 'n/a: why')."""
    if run.device_kind != "gpu":
        return None, "n/a: a CPU run"
    told = [t for e in run.epochs if (t := getattr(e, "peak_tflops", None))]
    if told:
        return float(told[-1]), "the engine's telemetry"
    found = _peak(run.gpu_model)
    if found is None:
        return None, f"n/a: no sourced peak for {run.gpu_model}"
    return found[0] * run.devices, found[1]


def achieved_tflops(run) -> float | None:
    """TFLOP/s the run achieved (all devices): images/s x training GFLOP per image / 1000."""
    gflop = train_gflop_per_image(run.model, run.image_size)
    if gflop is None or not run.images_per_sec:
        return None
    return run.images_per_sec * gflop / 1000.0


def gpu_util(run) -> float | None:
    """Mean GPU utilisation (%) over the epochs that report one (engines' telemetry)."""
    values = [v for e in run.epochs if (v := getattr(e, "gpu_util_pct", None)) is not None]
    return statistics.fmean(values) if values else None
