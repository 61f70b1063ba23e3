"""Benchmark: a CPU training step in NCHW against the same step in channels_last (NHWC).

    .venv/bin/python benchmarks/cpu_layout.py [--model resnet18] [--image-size 32] [--batch 8]
        [--threads 1] [--steps 15] [--repeats 3]

Why the PyTorch engine trains in NCHW on a CPU and channels_last on a GPU
(finetune.train.engines.torch.hardware.memory_format). Both sides are the same plain loop:
a torchvision network from the same seed, SGD momentum 0.9 and weight decay 1e-4, one
in-memory batch, forward + cross-entropy + backward + step; only the memory layout of the
weights and of the input differs. Each side runs --repeats times, alternating (after 3
warm-up steps each); it prints the CPU milliseconds of a step (process time: all threads),
best of each side and the ratio NHWC / NCHW (> 1: NCHW is the faster one here). Before the
timing, one step of each layout from the same weights must give the same loss to 1e-4
relative: the layouts compute the same function (the check of the reference).
"""

from __future__ import annotations

import argparse
import time


def _setup(args, layout):
    """The network (from seed 0), SGD and one batch (from seed 1), all in ``layout``."""
    import torch
    from torchvision import models

    torch.manual_seed(0)
    net = models.get_model(args.model, weights=None, num_classes=8).to(memory_format=layout)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=g)
    return net.train(), opt, x.contiguous(memory_format=layout), torch.arange(args.batch) % 8


def step_ms(args, layout, steps: int) -> float:
    import torch

    net, opt, x, y = _setup(args, layout)
    start = 0.0
    for i in range(3 + steps):
        if i == 3:
            start = time.process_time()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return (time.process_time() - start) / steps * 1e3


def first_loss(args, layout) -> float:
    import torch

    net, _, x, y = _setup(args, layout)
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(net(x), y))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads")
    p.add_argument("--steps", type=int, default=15, help="timed steps per repeat")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    for name in ("image_size", "batch", "threads", "steps", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")

    import torch
    from torchvision import models

    if args.model not in models.list_models(module=models):
        p.error(f"--model {args.model}: not a torchvision classification model (resnet18, "
                "resnet50, efficientnet_b0, ...: torchvision.models.list_models())")  # fmt: skip
    torch.set_num_threads(args.threads)
    nchw, nhwc = torch.contiguous_format, torch.channels_last
    a, b = first_loss(args, nchw), first_loss(args, nhwc)
    if abs(a - b) > 1e-4 * abs(a):
        raise SystemExit(f"the two layouts disagree: loss {a} (NCHW) vs {b} (NHWC)")
    runs: dict[str, list[float]] = {"NCHW": [], "NHWC": []}
    for _ in range(args.repeats):
        runs["NCHW"].append(step_ms(args, nchw, args.steps))
        runs["NHWC"].append(step_ms(args, nhwc, args.steps))
    print(f"{args.model}, {args.image_size} px, batch {args.batch}, {args.threads} thread(s), "
          f"{args.steps} timed steps x {args.repeats}")  # fmt: skip
    for name, ms in runs.items():
        print(f"{name}: {min(ms):7.1f} CPU-ms a step  runs {[round(m, 1) for m in ms]}")
    print(f"ratio NHWC / NCHW: {min(runs['NHWC']) / min(runs['NCHW']):.2f} best vs best")


if __name__ == "__main__":
    main()
