"""How far a run is from the hardware (the DAWNBench analysis's question): achieved TFLOP/s
from images/s and the network's training FLOPs per image, as a share of the GPU's peak, and
what the same run would have cost at 100 % of peak.

Training FLOPs per image = 3 x (forward multiply-adds x 2): forward, and a backward pass of
about twice the forward. Forward multiply-adds at 224 px are torchvision's model table
("GFLOPS", which counts multiply-adds): ResNet-18 1.81, -34 3.66, -50 4.09, -101 7.80,
-152 11.51; they scale with the image area. The GPU peak comes from the engines' telemetry
(``peak_tflops`` in the metrics events) or the sourced table finetune/catalog/gpu_peaks.csv
when this version has one; otherwise it is "n/a", never a guess.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from functools import lru_cache

FORWARD_GMACS_224 = {18: 1.81, 34: 3.66, 50: 4.09, 101: 7.80, 152: 11.51}


def train_gflop_per_image(model: str, image_size: int | None) -> float | None:
    """Training GFLOP for one image of ``model`` at ``image_size`` px (None: unknown net)."""
    m = re.search(r"resnet[-_]?(\d+)", model.lower())
    gmacs = FORWARD_GMACS_224.get(int(m.group(1))) if m else None
    if gmacs is None:
        return None
    return 6.0 * gmacs * ((image_size or 224) / 224.0) ** 2


@lru_cache(maxsize=1)
def _peak_table() -> dict[str, tuple[float, str]]:
    """{gpu model: (peak TFLOP/s, source)} from catalog/gpu_peaks.csv, {} when absent."""
    from importlib import resources

    try:
        text = resources.files("finetune.catalog").joinpath("gpu_peaks.csv").read_text("utf-8")
    except (FileNotFoundError, OSError):
        return {}
    out = {}
    for row in csv.DictReader(io.StringIO(text)):
        key = next((k for k in row if k and ("model" in k.lower() or k.lower() == "gpu")), None)
        col = next((k for k in row if k and "tflops" in k.lower()), None)
        src = next((k for k in row if k and "source" in k.lower()), None)
        try:
            out[row[key].strip()] = (float(row[col]), row.get(src, "") if src else "")
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


def peak_tflops(run) -> tuple[float | None, str]:
    """(peak TFLOP/s of the run's GPUs together, where from) or (None, 'n/a: why')."""
    if run.device_kind != "gpu":
        return None, "n/a: a CPU run"
    told = [getattr(e, "peak_tflops", None) for e in run.epochs]
    told = [t for t in told if t]
    if told:
        return float(told[-1]), "the engine's telemetry"
    found = _peak_table().get(run.gpu_model)
    if found is None:
        return None, f"n/a: no sourced peak for {run.gpu_model}"
    return found[0] * run.gpus, found[1] or "catalog/gpu_peaks.csv"


def achieved_tflops(run) -> float | None:
    """TFLOP/s the run achieved (all devices): images/s x training GFLOP per image / 1000."""
    gflop = train_gflop_per_image(run.model, run.image_size)
    if gflop is None or not run.images_per_sec:
        return None
    return run.images_per_sec * gflop / 1000.0


def gpu_util(run) -> float | None:
    """Mean GPU utilisation (%) over the epochs that report one (engines' telemetry)."""
    values = [getattr(e, "gpu_util_pct", None) for e in run.epochs]
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None
