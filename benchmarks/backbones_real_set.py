"""Benchmark: do ConvNeXt-T, EfficientNetV2-S and ViT-B/16 learn as well as ResNet-18 on a
small REAL image set, at the same budget? (issue 24's first acceptance item)

    (scikit-learn, for its digits, is in the dev lock: bash scripts/setup.sh installs it)
    OMP_NUM_THREADS=2 PYTHONPATH=$PWD .venv/bin/python benchmarks/backbones_real_set.py \
        [--quick] [--out results.json] [--per-class 40 --train-per-class 24 --epochs 4]

The images: scikit-learn's ``load_digits`` -- 1,797 real 8x8 grey handwritten digits (UCI
"Optical Recognition of Handwritten Digits", 43 writers), 10 classes, shipped inside the
scikit-learn wheel (no download). scikit-learn is not a dependency of finetune: install it
as above (1.6.1 has Python 3.11 wheels for numpy 1.23.5 and changes no pinned package).
``--per-class`` digits of each class (drawn with a seeded generator) are upscaled (bicubic)
to ``--size`` px RGB PNGs in a folder per class, then prepared by the library call behind
`finetune prepare folder` (seeded split: ``--train-per-class`` to train, the rest validate).

Each network trains from random init through the product path: the bundled smoke recipe
(smoke-resnet18-torch, smoke-convnext-tiny, smoke-efficientnet-v2-s, smoke-vit-b16: its
optimizer, learning rate, augmentation and the weights' preprocessing at 32 px) planned
by ``build_plan`` with the SAME budget overrides for all -- schedule.epochs, a cosine
schedule, train.batch_per_device, every batch of every epoch (train.max_batches_per_epoch=0)
-- then trained by the torch engine in this process on a temporary /opt/ml tree, on the
CPU with torch's threads from OMP_NUM_THREADS (2 if unset). So every model sees the same
images the same number of times; the wall seconds each took are reported beside it.

Pretrained arm: where torchvision's weight file for a model is already in torch hub's cache
($TORCH_HOME/hub/checkpoints, ~/.cache/torch/hub/checkpoints) the same run is repeated from
it (model.pretrained=true). Nothing is downloaded; models without a file are listed as such.

The table: model, parameters, epochs, images seen, seconds, validation top-1 (the best
epoch's, the model the run keeps), best epoch, and the ratio of each model's top-1 to
ResNet-18's from the same invocation. ``--out`` writes the same as JSON.

Time: the default (240 training images, 4 epochs of 7 batches of 32: 28 steps and 896 images
per model; 160 validation images) took 9 minutes on 2 CPU cores shared with other work, most
of it ViT-B/16 (~4-6 images/s) and EfficientNetV2-S; --quick halves images and epochs. Such a
budget is tiny (ResNet-18 has not converged), so the numbers compare the families' early
learning at one budget, not what each reaches; results are in docs/training.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (network, its bundled smoke recipe); the reference first
MODELS = [
    ("resnet18", "smoke-resnet18-torch"),
    ("convnext_tiny", "smoke-convnext-tiny"),
    ("efficientnet_v2_s", "smoke-efficientnet-v2-s"),
    ("vit_b_16", "smoke-vit-b16"),
]
REFERENCE = "resnet18"


def write_digits(folder: Path, per_class: int, size: int, seed: int) -> int:
    """``per_class`` of sklearn's digits per class as ``size`` px RGB PNGs, folder per class."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(seed)
    written = 0
    for label in range(10):
        index = np.flatnonzero(digits.target == label)
        chosen = rng.choice(index, size=min(per_class, len(index)), replace=False)
        (folder / str(label)).mkdir(parents=True)
        for i in sorted(chosen):
            grey = (digits.images[i] * (255.0 / 16.0)).round().astype(np.uint8)  # 0..16 ink
            image = Image.fromarray(grey, "L").resize((size, size), Image.BICUBIC)
            image.convert("RGB").save(folder / str(label) / f"{i:04d}.png")
            written += 1
    return written


def prepare(images: Path, out: Path, train_per_class: int, size: int, seed: int) -> dict:
    """`finetune prepare folder` as a library call; the dataset's manifest."""
    from finetune.data.datasets import prepare_folder

    params = dict(seed=seed, train_per_class=train_per_class, resize=size, quality=95)
    prepare_folder(images, out, "digits", params, workers=1)
    return json.loads((out / "manifest.json").read_text())


def budget_overrides(args, pretrained: bool) -> list[str]:
    """The same for every model: epochs, schedule, batch, all batches, no timed checkpoints."""
    return [
        f"schedule.epochs={args.epochs}",
        "schedule.kind=cosine",
        "schedule.steps=[]",
        f"train.batch_per_device={args.batch}",
        "train.max_batches_per_epoch=0",
        "train.checkpoint_interval_s=1000000",  # only the end-of-run model is written
        f"train.seed={args.seed}",
        "data.loader_workers=0",
        f"model.pretrained={'true' if pretrained else 'false'}",
    ]


def train_one(model: str, recipe: str, dataset: Path, work: Path, args, pretrained: bool) -> dict:
    """Plan ``recipe`` with the budget overrides, train it in this process; its table row."""
    from finetune.contracts.container import Layout
    from finetune.contracts.mltree import layout
    from finetune.plan import build_plan
    from finetune.train.engines.torch import RUNTIME
    from finetune.train.engines.torch.network import construct
    from finetune.train.layout import load_job

    plan = build_plan(recipe, dataset, overrides=budget_overrides(args, pretrained))
    hp = plan.hyperparameters
    root = layout(work / f"ml-{model}-{'pre' if pretrained else 'rand'}", plan)
    start = time.perf_counter()
    result = RUNTIME.fit(load_job(Layout(root)))
    seconds = time.perf_counter() - start
    assert result.stopped_by is None, result.stopped_by
    out = root / "output" / "data"
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    report = json.loads((out / "val-report.json").read_text())
    best = report["epoch"]
    net = construct(model, hp.num_classes, hp.image_size)
    return {
        "model": model,
        "recipe": recipe,
        "init": "pretrained" if pretrained else "random",
        "params": sum(p.numel() for p in net.parameters()),
        "optimizer": f"{hp.optimizer} lr {hp.lr:g}",
        "epochs": len(events),
        "images_seen": sum(e["samples"] for e in events),
        "seconds": round(seconds, 1),
        "val_top1": next(e["val_acc"] for e in events if e["epoch"] == best),
        "best_epoch": best,
        "val_count": events[-1]["val_count"],
        "val_top1_per_epoch": [round(e["val_acc"], 4) for e in events],
        "train_loss_last": round(events[-1]["train_loss"], 4),
    }


def available_weights(models: list[str]) -> dict[str, str]:
    """{model: weight file} for the models whose torchvision weights are in torch hub's cache."""
    from finetune.errors import DataError
    from finetune.train.engines.torch import weights as wt

    found = {}
    for model in models:
        with contextlib.suppress(DataError):  # no file for it: the pretrained arm skips it
            found[model] = str(wt.locate(model, "", [wt.hub_dir()]).path)
    return found


def add_ratios(rows: list[dict]) -> None:
    """Each row's top-1 over ResNet-18's with the same initialisation (same invocation)."""
    ref = {r["init"]: r["val_top1"] for r in rows if r["model"] == REFERENCE}
    for r in rows:
        base = ref.get(r["init"])
        r["ratio_to_resnet18"] = round(r["val_top1"] / base, 3) if base else None


def print_table(rows: list[dict]) -> None:
    head = f"{'model':18s} {'init':10s} {'params':>8s} {'epochs':>6s} {'images':>7s} "
    head += f"{'seconds':>8s} {'val top-1':>9s} {'best ep':>7s} {'/ResNet-18':>10s}"
    print(head)
    for r in rows:
        ratio = "-" if r["ratio_to_resnet18"] is None else f"{r['ratio_to_resnet18']:.3f}"
        print(
            f"{r['model']:18s} {r['init']:10s} {r['params'] / 1e6:7.1f}M {r['epochs']:6d} "
            f"{r['images_seen']:7d} {r['seconds']:8.1f} {r['val_top1']:9.4f} "
            f"{r['best_epoch']:7d} {ratio:>10s}"
        )


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="~2-3 minutes: half the images and epochs")
    p.add_argument("--per-class", type=int, default=40, help="digits written per class")
    p.add_argument("--train-per-class", type=int, default=24, help="of those, to train")
    p.add_argument("--size", type=int, default=40, help="PNG side; prepared shorter side")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--models", default=",".join(m for m, _ in MODELS))
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.per_class, args.train_per_class, args.epochs = 20, 12, 2
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "2")  # the torch engine sets its threads from it
    import logging

    import torch

    logging.basicConfig(level=logging.WARNING)
    wanted = args.models.split(",")
    chosen = [(m, r) for m, r in MODELS if m in wanted]
    weights = available_weights([m for m, _ in chosen])
    rows = []
    with tempfile.TemporaryDirectory(prefix="finetune-digits-") as tmp:
        work = Path(tmp)
        count = write_digits(work / "images", args.per_class, args.size, args.seed)
        manifest = prepare(
            work / "images", work / "digits", args.train_per_class, args.size, args.seed
        )
        splits = {k: v["count"] for k, v in manifest["splits"].items()}
        print(f"sklearn digits: {count} images written, prepared splits {splits}", flush=True)
        for pretrained in (False, True):
            for model, recipe in chosen:
                if pretrained and model not in weights:
                    continue
                rows.append(train_one(model, recipe, work / "digits", work, args, pretrained))
                r = rows[-1]
                print(
                    f"  {model} ({r['init']}): top-1 {r['val_top1']:.4f} in {r['seconds']} s",
                    flush=True,
                )
    add_ratios(rows)
    print_table(rows)
    missing = [m for m, _ in chosen if m not in weights]
    if missing:
        print(
            f"no pretrained weight file offline for: {', '.join(missing)} "
            f"(looked in {torch.hub.get_dir()}/checkpoints); nothing downloaded"
        )
    result = {
        "dataset": "sklearn.datasets.load_digits (UCI optical handwritten digits)",
        "splits": splits,
        "budget": {
            "epochs": args.epochs,
            "batch": args.batch,
            "schedule": "cosine",
            "image_size": 32,
            "prepared_side": args.size,
        },
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, torch {torch.__version__}",
        "pretrained_weights_offline": weights,
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
