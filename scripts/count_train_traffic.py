"""Count the bytes one training step moves, per layer class, and write the model's table.

    PYTHONPATH=. .venv/bin/python scripts/count_train_traffic.py   # rewrites the CSV below

For every (network, image size) of train_flops.csv (scripts/count_train_flops.py: the torch
engine's model table at the sizes it trains), the network is built by torchvision with
weights=None and one forward + backward runs on the meta device (shapes only) under
finetune.train.engines.torch.traffic_count, in fp32 and in bf16 (the "mixed" rows: fp16 moves the
same bytes): FLOPs of the convolutions and matrix products, the bytes they and the
elementwise ops (norms, activations, adds, pooling, copies) read and write per image, the
elements the elementwise ops touch, the weight bytes per step, and the ops per step.

The optimizer's update is counted from the parameters: SGD with momentum in fp32 reads the
weight, its gradient and the momentum and writes the weight and the momentum (20 bytes per
parameter); under AMP each step also casts the weights to half and the half gradients back
(12 bytes per parameter). Run it again after a torch upgrade (the version is in every row).
"""

from __future__ import annotations

import sys
from pathlib import Path

from finetune.catalog._files import atomic_write, read_rows, rows_to_csv

ROOT = Path(__file__).resolve().parents[1]
PERF = ROOT / "finetune" / "estimate" / "perf"
OUT = PERF / "train_traffic.csv"
HEADER = ("Network", "ImageSize", "Precision", "Parameters", "MatmulGflops", "MatmulMB",
          "ElementwiseMB", "ElementwiseMelems", "WeightsMB", "OptimizerMB", "Kernels",
          "Counter", "TorchVersion")  # fmt: skip


def counted() -> list[tuple[str, int]]:
    """The (network, image size) pairs train_flops.csv holds, in its order."""
    text = (PERF / "train_flops.csv").read_text()
    return [(r["Network"], int(r["ImageSize"])) for r in read_rows(text, ("Network",), "flops")]


def main() -> None:
    # the torch engine's counter and networks: imported here, where the counting starts
    import torch

    from finetune.train.engines.torch import traffic_count
    from finetune.train.engines.torch.network import construct

    rows = []
    for name, size in counted():
        for label in traffic_count.DTYPES:
            net = construct(name, 1000, size)  # ImageNet's head, as train_flops.csv
            rows.append(traffic_count.row(name, net, size, label))
            print(f"{name} {size} px {label}: {rows[-1][4]} GFLOP, {rows[-1][5]} + "
                  f"{rows[-1][6]} MB", file=sys.stderr, flush=True)  # fmt: skip
    atomic_write(OUT, rows_to_csv(HEADER, rows))
    print(f"{len(rows)} rows -> {OUT} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
