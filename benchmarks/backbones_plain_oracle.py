"""Oracle for benchmarks/backbones_real_set.py: the same networks from random init on the same
real digits, trained by a plain PyTorch loop that uses no finetune code -- so a shortfall seen
through finetune can be told apart from the architecture's own behaviour at that budget.

    (scikit-learn, for its digits, is in the dev lock: bash scripts/setup.sh installs it)
    .venv/bin/python benchmarks/backbones_plain_oracle.py efficientnet_v2_s [--opt sgd|adamw]
        [--epochs 4] [--threads 1] [--new-head]

The data: scikit-learn's load_digits, 40 per class drawn with numpy's default_rng(0), the first
24 of each class to train and 16 to validate, upscaled (bicubic) to 32 px RGB and normalised with
ImageNet's mean/std. The loop: torchvision's builder with num_classes=10, batch 32 shuffled by
torch.manual_seed(0), SGD (lr 0.01, momentum 0.9, wd 1e-4) or AdamW (lr 1e-3, wd 0.05), cosine
decay per step, no augmentation; validation top-1 in eval mode after every epoch. --new-head
replaces an EfficientNet's classifier with a default-initialised nn.Linear (torchvision
initialises it uniform +-1/sqrt(classes), so with 10 classes its first logits are large).
"""

from __future__ import annotations

import argparse
import math
import time


def digits(size: int = 32):
    """(train x, train y, val x, val y) tensors, as the module docstring says."""
    import numpy as np
    import torch
    from PIL import Image
    from sklearn.datasets import load_digits

    data, rng, train, val = load_digits(), np.random.default_rng(0), [], []
    for label in range(10):
        chosen = rng.choice(np.flatnonzero(data.target == label), 40, replace=False)
        for j, i in enumerate(chosen):
            grey = Image.fromarray((data.images[i] * 255 / 16).round().astype(np.uint8))
            rgb = grey.resize((size, size), Image.BICUBIC).convert("RGB")
            (train if j < 24 else val).append((np.asarray(rgb, dtype=np.float32) / 255, label))
    mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]

    def tensors(items):
        x = torch.tensor(np.stack([a for a, _ in items])).permute(0, 3, 1, 2)
        return (x - mean) / std, torch.tensor([label for _, label in items])

    return (*tensors(train), *tensors(val))


def main(argv: list[str] | None = None) -> list[float]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="a torchvision classification builder, e.g. resnet18")
    p.add_argument("--opt", choices=["sgd", "adamw"], default="sgd")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--new-head", action="store_true")
    args = p.parse_args(argv)
    import torch
    import torchvision

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    xt, yt, xv, yv = digits()
    net = torchvision.models.get_model(args.model, weights=None, num_classes=10)
    if args.new_head:
        net.classifier[-1] = torch.nn.Linear(net.classifier[-1].in_features, 10)
    if args.opt == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.05)
    steps = args.epochs * math.ceil(len(yt) / 32)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps))
    )
    start, accuracies = time.time(), []
    for epoch in range(args.epochs):
        net.train()
        losses = []
        for batch in torch.randperm(len(yt)).split(32):
            loss = torch.nn.functional.cross_entropy(net(xt[batch]), yt[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        net.eval()
        with torch.no_grad():
            accuracies.append((net(xv).argmax(1) == yv).float().mean().item())
        mean_loss = sum(losses) / len(losses)
        print(
            f"{args.model} {args.opt} epoch {epoch}: train loss {mean_loss:.3f} "
            f"val top-1 {accuracies[-1]:.3f} ({time.time() - start:.0f} s)",
            flush=True,
        )
    return accuracies


if __name__ == "__main__":
    main()
