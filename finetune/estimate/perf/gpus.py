"""The GPU facts the performance model needs: which gpu_peaks.csv row an instance's (or a
calibration row's) GPU is, its peak at a training precision, its architecture, and the three
roofs of the roofline (``roofs``): the tensor peak, the memory bandwidth and the rate its SMs
issue instructions at.

Precision classes: ``fp32`` (fp32 and tf32: on Ampere and newer cuDNN runs fp32 convolutions
on TF32 Tensor Cores by default -- PyTorch's torch.backends.cudnn.allow_tf32 is True -- so the
peak that binds is the TF32 one; before Ampere it is the fp32 one) and ``mixed`` (fp16, bf16,
amp: the fp16/bf16 Tensor Core peak; a GPU without one, K80, trains at its fp32 peak).
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.catalog import gpu_peaks

# instances.csv names the GPU as AWS does; gpu_peaks.csv tells variants apart. AWS's P3 carry
# V100 SXM2 16/32 GB, P4d A100 SXM4 40 GB, P5 H100 SXM5 (aws.amazon.com/ec2/instance-types).
_AWS_VARIANT = {"V100": "V100 SXM2", "A100": "A100 40GB", "H100": "H100 SXM"}
# Architectures in release order: the cross-generation transfer names the nearest ones.
ARCHITECTURES = (
    "Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper",
    "Blackwell",
)  # fmt: skip
MIXED = ("fp16", "bf16", "amp", "mixed")


def precision_class(precision: str) -> str:
    """'fp16' / 'bf16' / 'amp' -> 'mixed'; 'fp32' / 'tf32' -> 'fp32'."""
    return "mixed" if precision.lower() in MIXED else "fp32"


def peak(gpu_model: str) -> gpu_peaks.GpuPeak | None:
    """The gpu_peaks.csv row of a GPU named as gpu_peaks.csv or instances.csv name it."""
    name = _AWS_VARIANT.get(gpu_model, gpu_model)
    for row in gpu_peaks.peaks():
        if row.model == name:
            return row
    return None


def resolve_precision(asked: str, gpu_model: str) -> str:
    """The precision a recipe's ``auto`` trains at on this GPU, as the torch engine picks it
    (train/engines/torch/hardware.precision): bf16 where the GPU has it, else fp16."""
    if asked != "auto":
        return asked
    row = peak(gpu_model)
    if row is None or row.bf16:
        return "bf16"
    return "fp16" if row.fp16 else "fp32"


def peak_tflops(gpu_model: str, precision: str) -> tuple[float, str] | None:
    """(dense TFLOP/s that bind at ``precision``, which unit that is); None: unknown GPU, or
    one the table has no peak for."""
    row = peak(gpu_model)
    if row is None:
        return None
    mixed = row.bf16 or row.fp16
    if precision_class(precision) == "mixed" and mixed:
        return mixed, "fp16/bf16 Tensor Core"
    if row.tf32:
        return row.tf32, "TF32 Tensor Core"
    return (row.fp32, "fp32") if row.fp32 else None


def architecture(gpu_model: str) -> str:
    """'Ampere', 'Hopper', ... ('' for a GPU the table lacks)."""
    row = peak(gpu_model)
    return row.architecture if row else ""


def generation_distance(a: str, b: str) -> int:
    """How many architecture generations apart two architectures are (99: unknown)."""
    if a not in ARCHITECTURES or b not in ARCHITECTURES:
        return 99
    return abs(ARCHITECTURES.index(a) - ARCHITECTURES.index(b))


@dataclass(frozen=True)
class Roofs:
    """What one GPU can do per second at a training precision."""

    gpu: str  # gpu_peaks.csv's model
    tensor_tflops: float  # the dense peak that binds at the precision (peak_tflops)
    tensor_unit: str
    memory_gbps: float
    # thread-instructions/s: 4 warp schedulers x 32 lanes per SM per clock since Maxwell =
    # fp32 peak x 64 / FP32 lanes per SM (Ampere GA10x, Ada, Hopper double the FP32 lanes)
    issue_tops: float


def roofs(gpu_model: str, precision: str) -> Roofs | None:
    """The GPU's roofs at ``precision``; None when the table lacks a peak or a spec."""
    row, tensor = peak(gpu_model), peak_tflops(gpu_model, precision)
    if row is None or tensor is None or not (row.memory_gbps and row.fp32 and row.fp32_per_sm):
        return None
    issue = row.fp32 * 64 / row.fp32_per_sm
    return Roofs(row.model, tensor[0], tensor[1], row.memory_gbps, issue)
