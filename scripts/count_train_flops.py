"""Count training FLOPs per image with the engine's own counter and write the catalog table.

    PYTHONPATH=. .venv/bin/python scripts/count_train_flops.py   # rewrites the CSV below

Each network is built by torchvision with weights=None (offline) and counted by
finetune.train.engines.torch.flops.per_image (torch.utils.flop_counter on meta tensors: one
forward + backward, multiply-adds count 2), and its forward alone by the same counter, so the
table shows the counted training FLOPs beside the "3 x forward" rule of thumb. Run it again
after a torch upgrade; the torch version is written into every row. The networks are the
torch engine's model table (finetune.engines.backbones), each at its weights' crop size
and 224 px, plus the sizes the bundled recipes (and their smoke variants) train at.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from finetune.catalog._files import atomic_write, rows_to_csv
from finetune.engines import backbones
from finetune.train.engines.torch.flops import per_image
from finetune.train.engines.torch.network import construct

OUT = Path(__file__).resolve().parents[1] / "finetune" / "estimate" / "perf" / "train_flops.csv"
HEADER = ("Network", "ImageSize", "Parameters", "TrainGflops", "ForwardGflops",
          "ThreeXForwardGflops", "Counter", "TorchVersion", "Notes", "Family")  # fmt: skip
# torch's flop counter ignores ``groups`` in the convolution backward formula: a depthwise
# conv's backward is counted as if it were dense (a 64-group 7x7 conv: 66x its forward, not
# 3x). Where the count runs this far above 3 x forward, the table says so and the
# performance model uses 3 x forward.
OVERCOUNT = 1.10
GROUPED = (
    "counter overcounts the backward of grouped (depthwise) convolutions (groups ignored): "
    "the model uses 3 x forward"
)
RESNETS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")
# (network, image sizes): every network at its weights' crop size and at 224; the sizes
# recipes use (32 for the smoke recipes, 256 for caltech256-efficientnet-v2-s) and the sizes
# published benchmarks train at (timm: 160-300) for the calibrated networks.
EXTRA = {
    **{n: (32, 128, 160, 176, 192, 224, 256, 288) for n in RESNETS},
    "convnext_tiny": (32, 288),
    "efficientnet_v2_s": (32, 256, 288, 300),
    "vit_b_16": (32,),
}


def sizes() -> dict[str, tuple[int, ...]]:
    """The (network: image sizes) counted."""
    out = {}
    for name, row in backbones.TABLE.items():
        want = {row.crop, 224, *EXTRA.get(name, ())}
        out[name] = tuple(sorted(s for s in want if s % row.multiple_of == 0))
    return out


def forward_flops(net: torch.nn.Module, size: int, batch: int = 2) -> float:
    """FLOPs of one forward pass per image (inference mode: no autograd graph)."""
    net = net.to("meta")
    x = torch.empty(batch, 3, size, size, device="meta")
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        net(x)
    return counter.get_total_flops() / batch


def rows():
    counter = "finetune.train.engines.torch.flops.per_image (torch.utils.flop_counter)"
    for name, counted in sizes().items():
        family = backbones.TABLE[name].family
        for size in counted:
            net = construct(name, 1000, size)  # ImageNet's head (ViT/MaxViT: at this size)
            train = per_image(net.train(), size)
            fwd = forward_flops(net.eval(), size)
            if train is None:
                sys.exit(f"counting {name} at {size} px failed")
            note = GROUPED if train > OVERCOUNT * 3 * fwd else ""
            params = sum(p.numel() for p in net.parameters())  # the gradient all-reduced
            gflops = (f"{train / 1e9:.3f}", f"{fwd / 1e9:.3f}", f"{3 * fwd / 1e9:.3f}")
            yield (name, size, params, *gflops, counter, torch.__version__, note, family)
            print(f"{name} {size} px: {gflops[0]} GFLOP/image", file=sys.stderr, flush=True)


def main() -> None:
    table = list(rows())
    atomic_write(OUT, rows_to_csv(HEADER, table))
    print(f"{len(table)} rows -> {OUT} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
