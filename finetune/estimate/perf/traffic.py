"""What one training image costs a GPU, per layer class: the bundled table.

train_traffic.csv is written by scripts/count_train_traffic.py (the torch engine's
traffic_count: one forward + backward on the meta device, op by op) for every (network, image
size) of train_flops.csv, in fp32 and in half precision ("mixed": fp16 and bf16 move the same
bytes). Per image: the FLOPs of convolutions and matrix products, the bytes they read and
write, the bytes and elements of the elementwise ops (normalisations, activations, adds,
pooling, copies). Per step: the weight bytes (read forward and backward, gradients written),
the optimizer's update and the kernels launched. A size not in the table is scaled from the
nearest counted one by pixel area (activations; weights and kernels stay), except a ViT's."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from finetune.catalog._files import read_rows
from finetune.estimate.perf import flops, gpus
from finetune.estimate.perf._data import perf_text

FILE = "train_traffic.csv"
HEADER = ("Network", "ImageSize", "Precision", "Parameters", "MatmulGflops", "MatmulMB",
          "ElementwiseMB", "ElementwiseMelems", "WeightsMB", "OptimizerMB", "Kernels",
          "Counter", "TorchVersion")  # fmt: skip


@dataclass(frozen=True)
class Traffic:
    """One network at one image size and precision class (fp32 or mixed)."""

    network: str
    image_size: int
    precision: str
    parameters: int
    matmul_gflops: float  # per image: convolutions, matrix products, attention
    matmul_mb: float  # per image, read + written by those
    elementwise_mb: float  # per image: norms, activations, adds, pooling, copies, loss
    elementwise_melems: float  # per image: elements those read + write
    weights_mb: float  # per step: weights read (forward, backward), gradients written
    optimizer_mb: float  # per step: the optimizer's update (and AMP's weight casts)
    kernels: int  # per step: ops that move data
    torch_version: str

    def describe(self) -> str:
        return (
            f"{self.network} at {self.image_size} px ({self.precision}): "
            f"{self.matmul_gflops:.1f} GFLOP and {self.matmul_mb:.0f} MB in convolutions/"
            f"matmuls, {self.elementwise_mb:.0f} MB ({self.elementwise_melems:.0f} M elements) "
            f"in norms/elementwise per image; {self.weights_mb + self.optimizer_mb:.0f} MB "
            f"weights and update, {self.kernels} kernels per step (counted on the meta "
            f"device, torch {self.torch_version})"
        )


@functools.cache
def table() -> dict[tuple[str, int, str], Traffic]:
    """Every counted (network, image size, precision class)."""
    return parse(perf_text(FILE), FILE)


def parse(text: str, origin: str) -> dict[tuple[str, int, str], Traffic]:
    """The rows of a table of these columns (the bundled one, or ondemand.py's)."""
    out = {}
    for r in read_rows(text, HEADER, origin):
        t = Traffic(
            r["Network"], int(r["ImageSize"]), r["Precision"], int(r["Parameters"]),
            float(r["MatmulGflops"]), float(r["MatmulMB"]), float(r["ElementwiseMB"]),
            float(r["ElementwiseMelems"]), float(r["WeightsMB"]), float(r["OptimizerMB"]),
            int(r["Kernels"]), r["TorchVersion"],
        )  # fmt: skip
        out[(t.network, t.image_size, t.precision)] = t
    return out


def networks() -> tuple[str, ...]:
    """The counted networks, sorted (what an unknown name is told)."""
    return tuple(sorted({n for n, _, _ in table()}))


def lookup(model: str, image_size: int, precision: str) -> Traffic | None:
    """The counts for a recipe's model name at a size and training precision; None for a
    network not counted (or a ViT at a size not counted: its attention is not area-bound)."""
    net = flops.network_key(model)
    cls = gpus.precision_class(precision)
    sizes = sorted(s for n, s, p in table() if n == net and p == cls)
    if net is None or not sizes:
        return None
    if (net, image_size, cls) in table():
        return table()[(net, image_size, cls)]
    if flops.family(net) == "vit":
        return None
    near = min(sizes, key=lambda s: abs(s - image_size))
    base, area = table()[(net, near, cls)], (image_size / near) ** 2
    return replace(
        base, image_size=image_size, matmul_gflops=base.matmul_gflops * area,
        matmul_mb=base.matmul_mb * area, elementwise_mb=base.elementwise_mb * area,
        elementwise_melems=base.elementwise_melems * area,
    )  # fmt: skip
