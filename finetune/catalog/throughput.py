"""Training throughput (images/s) to estimate time and euros before a launch.

Preference order: measured history for the same network and GPU model (from the run ledger,
passed in by the caller as ``Measurement`` data), else a published reference figure per GPU
and network, each with its citation, else a labelled derivation from another network's
figure. Figures are per GPU, steady state, training (forward + backward), fp32 unless noted.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

MXNET_FAQ = (
    "MXNet docs, 'Some Tips for Improving MXNet Performance' (api/faq/perf), training results: "
    "example/image-classification/train_imagenet.py, MXNet 1.2.0.rc1, cuDNN 7.0.5, batch 32"
)
NVIDIA_DLE = (
    "NVIDIA DeepLearningExamples, MxNet/Classification/RN50v1.5 README, training performance "
    "(mxnet-20.12 NGC container, 1 GPU)"
)
BEEVA = (
    "BEEVA Labs MXNet fine-tuning study (ResNet-152, Caltech-256, p2.8xlarge): about 20 img/s "
    "on 1 K80 and 150 img/s on 8, as quoted in issue 4"
)


@dataclass(frozen=True)
class Reference:
    """A published per-GPU training throughput and where it comes from."""

    gpu_model: str
    network: str  # "resnet50", "resnet152"
    precision: str  # "fp32" or "fp16"
    images_per_sec: float
    citation: str


REFERENCES: tuple[Reference, ...] = (
    Reference("K80", "resnet50", "fp32", 49.48, f"{MXNET_FAQ}, K80 (one GK210 of a p2)"),
    Reference("V100", "resnet50", "fp32", 298.51, f"{MXNET_FAQ}, V100 (p3.2xlarge)"),
    Reference("K80", "resnet152", "fp32", 20.0, BEEVA),
    Reference("V100", "resnet50", "fp16", 1376.0, f"{NVIDIA_DLE}, DGX-1 V100 16GB, batch 192"),
    Reference(
        "A100",
        "resnet50",
        "fp32",
        1022.0,
        f"{NVIDIA_DLE}, DGX A100 80GB, TF32 (Ampere's default math for fp32), batch 256",
    ),
    Reference("A100", "resnet50", "fp16", 2180.0, f"{NVIDIA_DLE}, DGX A100 80GB, batch 256"),
)

# Multi-GPU estimates assume BEEVA's measured 8-GPU efficiency: 150 / (8 x 20) = 0.9375.
MULTI_GPU_EFFICIENCY = 150.0 / (8 * 20.0)
# ResNet-152 costs ~2.5x ResNet-50 per image; the ratio measured on the same GPU (K80).
RESNET152_PER_RESNET50 = 20.0 / 49.48


@dataclass(frozen=True)
class Measurement:
    """One finished run's steady-state throughput (all GPUs together), from the ledger."""

    model: str
    gpu_model: str
    gpus: int
    images_per_sec: float
    run_id: str = ""


@dataclass(frozen=True)
class Throughput:
    """An images/s figure for a planned run and how it was obtained."""

    images_per_sec: float  # all GPUs together
    per_gpu: float
    source: str
    measured: bool


def network_key(model: str) -> str | None:
    """'resnet50_v1' / 'imagenet11k-resnet-152' -> 'resnet50' / 'resnet152'; None if unknown."""
    m = re.search(r"resnet[-_]?(\d+)", model.lower())
    return f"resnet{m.group(1)}" if m else None


def _scale(per_gpu: float, gpus: int) -> float:
    return per_gpu * gpus * (1.0 if gpus == 1 else MULTI_GPU_EFFICIENCY)


def _from_history(net: str, gpu_model: str, gpus: int, history: Iterable[Measurement]):
    same = [
        m
        for m in history
        if network_key(m.model) == net and m.gpu_model == gpu_model and m.images_per_sec > 0
    ]
    exact = [m for m in same if m.gpus == gpus]
    if exact:
        total = statistics.median(m.images_per_sec for m in exact)
        ids = ", ".join(m.run_id for m in exact if m.run_id)
        return Throughput(
            total, total / gpus, f"measured: median of {len(exact)} run(s) {ids}", True
        )
    if same:
        ones = [m for m in same if m.gpus == 1] or same
        per_gpu = statistics.median(m.images_per_sec / m.gpus for m in ones)
        source = (
            f"measured per GPU on {ones[0].gpus}-GPU run(s), scaled to {gpus} GPUs "
            f"at {MULTI_GPU_EFFICIENCY:.1%} efficiency"
        )
        return Throughput(_scale(per_gpu, gpus), per_gpu, source, True)
    return None


def reference(gpu_model: str, network: str, precision: str = "fp32") -> Reference | None:
    """The published figure for this GPU model, network and precision, if the table has one."""
    for ref in REFERENCES:
        if (ref.gpu_model, ref.network, ref.precision) == (gpu_model, network, precision):
            return ref
    return None


def estimate(
    model: str,
    gpu_model: str,
    gpus: int,
    history: Iterable[Measurement] = (),
    precision: str = "fp32",
) -> Throughput | None:
    """Best available images/s for ``gpus`` x ``gpu_model`` training ``model``; None if unknown."""
    net = network_key(model)
    if net is None or gpus < 1:
        return None
    found = _from_history(net, gpu_model, gpus, list(history))
    if found is not None:
        return found
    scaling = "" if gpus == 1 else f"; x{gpus} GPUs at {MULTI_GPU_EFFICIENCY:.1%} efficiency"
    ref = reference(gpu_model, net, precision)
    if ref is not None:
        per_gpu = ref.images_per_sec
        return Throughput(
            _scale(per_gpu, gpus), per_gpu, f"reference: {ref.citation}{scaling}", False
        )
    base = reference(gpu_model, "resnet50", precision)
    if net == "resnet152" and base is not None:
        per_gpu = base.images_per_sec * RESNET152_PER_RESNET50
        source = (
            f"derived: ResNet-50 reference x {RESNET152_PER_RESNET50:.3f} (ResNet-152/ResNet-50 "
            f"ratio measured on K80) -- ResNet-50: {base.citation}{scaling}"
        )
        return Throughput(_scale(per_gpu, gpus), per_gpu, source, False)
    return None
