"""Training FLOPs and parameters per image, per (network, image size): the bundled table.

train_flops.csv is written by scripts/count_train_flops.py with the engine's own counter
(finetune.train.engines.torch.flops.per_image: one forward + backward on meta tensors) and
shows the "3 x forward" rule beside it, for every network of the torch engine's model table
(finetune.engines.backbones; the Family column is its family). The model uses the
counted figure, except where the counter is known to overcount (depthwise convolutions: the
row's Notes say so), where it uses 3 x forward. A size not in the table is scaled from the
nearest counted size by pixel area (exact for convolutions, which is what the table holds at
several sizes).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from finetune.catalog._files import read_rows
from finetune.estimate.perf._data import perf_text

FILE = "train_flops.csv"
HEADER = ("Network", "ImageSize", "Parameters", "TrainGflops", "ForwardGflops",
          "ThreeXForwardGflops", "Counter", "TorchVersion", "Notes", "Family")  # fmt: skip


@dataclass(frozen=True)
class FlopCount:
    """One network at one image size: what the model charges per training image."""

    network: str
    image_size: int
    parameters: int
    counted_gflops: float  # the engine's counter, forward + backward
    three_x_forward_gflops: float
    torch_version: str
    note: str  # why the counted figure is not used, "" when it is
    family: str = ""  # the torch engine's model family (resnet, convnext, vit, ...)

    @property
    def gflops(self) -> float:
        """GFLOPs per training image the model uses."""
        return self.three_x_forward_gflops if self.note else self.counted_gflops

    def describe(self) -> str:
        used = "3 x forward" if self.note else "counted"
        return (
            f"{self.network} at {self.image_size} px: {self.gflops:.1f} GFLOP/image ({used}; "
            f"counted {self.counted_gflops:.1f}, 3 x forward {self.three_x_forward_gflops:.1f}, "
            f"torch {self.torch_version})"
        )


@functools.cache
def table() -> dict[tuple[str, int], FlopCount]:
    """Every counted (network, image size)."""
    out = {}
    for r in read_rows(perf_text(FILE), HEADER, FILE):
        count = FlopCount(
            r["Network"], int(r["ImageSize"]), int(r["Parameters"]), float(r["TrainGflops"]),
            float(r["ThreeXForwardGflops"]), r["TorchVersion"], r["Notes"], r["Family"],
        )  # fmt: skip
        out[(count.network, count.image_size)] = count
    return out


_ALIASES = (  # recipe model names (torchvision, GluonCV, the MXNet studies) -> table names
    (r"resnet[-_]?(18|34|50|101|152)", "resnet{}"),
    (r"convnext[-_]?tiny", "convnext_tiny"),
    (r"efficientnet[-_]?v2[-_]?s", "efficientnet_v2_s"),
    (r"vit[-_]?b[-_]?16", "vit_b_16"),
)


def network_key(model: str) -> str | None:
    """'resnet50_v1' / 'imagenet11k-resnet-152' -> 'resnet50' / 'resnet152'; None if unknown.
    A torchvision name in the table is itself ('wide_resnet50_2' is not 'resnet50'). GluonCV's
    resnet50_v1 is charged as torchvision's resnet50 (v1.5: ~3 % more FLOPs)."""
    name = model.lower()
    if name in _networks():
        return name
    for pattern, key in _ALIASES:
        m = re.search(pattern, name)
        if m:
            return key.format(*m.groups())
    return None


@functools.cache
def _networks() -> dict[str, str]:
    """{network: family} of every counted network."""
    return {count.network: count.family for count in table().values()}


def family(model: str) -> str | None:
    """The model family of a recipe's model name ('resnet50_v1' -> 'resnet'); None if the
    network is not counted."""
    net = network_key(model)
    return _networks().get(net) if net else None


def lookup(model: str, image_size: int) -> FlopCount | None:
    """The FLOP count for a model name at an image size; None for a network not counted."""
    net = network_key(model)
    sizes = sorted(s for n, s in table() if n == net)
    if net is None or not sizes:
        return None
    if (net, image_size) in table():
        return table()[(net, image_size)]
    if family(net) == "vit":
        return None  # global attention: its cost is not proportional to pixel area
    near = min(sizes, key=lambda s: abs(s - image_size))
    base, area = table()[(net, near)], (image_size / near) ** 2
    return FlopCount(
        net, image_size, base.parameters, base.counted_gflops * area,
        base.three_x_forward_gflops * area, base.torch_version, base.note, base.family,
    )  # fmt: skip
