"""The timm transfer test's three arms on scikit-learn's handwritten digits (decision 185).

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD .venv/bin/python benchmarks/timm_transfer_digits.py \
        [--split 7] [--target-train 20] [--pretrain-epochs 16] [--seed 0] [--ft-lr 0.001]

Each timm family is pre-trained on digits 0..split-1 (standing in for ImageNet), then trained
one epoch on digits split..9 from those weights and from random ones, with the settings of
tests/train/engines/torch/test_timm_transfer.py; prints the first epoch's gain per family.
The digits (UCI, 8x8 grey) ship inside scikit-learn: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODELS = ["timm/test_resnet", "timm/test_vit", "timm/test_efficientnet"]  # the test's three
SIDE = 40  # the smoke recipe's 32 px crop with room to move, as the test prepares its sets
COMMON = ["batch_per_device=16", "kind=cosine", "steps=[]", "optimizer.name=adamw",
          "loader_workers=0"]  # fmt: skip


def write_digits(folder: Path, labels: range, per_class: int | None, seed: int) -> None:
    """``per_class`` digits of each label (all if None) as SIDE px RGB PNGs, folder per class.
    Bilinear: the 8x8 values count ink in 4x4 blocks of UCI's 32x32 bitmaps."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(seed)
    for label in labels:
        index = np.flatnonzero(digits.target == label)
        chosen = index if per_class is None else rng.choice(index, per_class, replace=False)
        (folder / str(label)).mkdir(parents=True)
        for i in sorted(chosen):
            grey = (digits.images[i] * (255 / 16)).round().astype(np.uint8)  # ink 0..16
            image = Image.fromarray(grey, "L").resize((SIDE, SIDE), Image.BILINEAR)
            image.convert("RGB").save(folder / str(label) / f"{i:04d}.png")


def tasks(root: Path, args) -> dict[str, Path]:
    """Source: --source-per-class of each digit below --split, a quarter validating.
    Target: every other digit, --target-train of each to train (0: a quarter validating)."""
    from finetune.data.datasets import prepare_folder

    out = {}
    target_split = {"train_per_class": args.target_train} if args.target_train else None
    for task, labels, per_class, split in (
        ("source", range(args.split), args.source_per_class, None),
        ("target", range(args.split, 10), None, target_split),
    ):
        write_digits(root / "images" / task, labels, per_class, seed=1)
        params = dict(**(split or {"val_ratio": 0.25}), resize=SIDE, quality=95, seed=0)
        out[task] = prepare_folder(root / "images" / task, root / task, task, params, 1).out
    return out


def train(root: Path, dataset: Path, model: str, overrides: list[str]) -> list[float]:
    """One run of the torch smoke recipe with ``model`` in this process; its val accuracies."""
    from finetune.contracts.container import Layout
    from finetune.contracts.mltree import layout
    from finetune.plan import build_plan
    from finetune.train.engines.torch import RUNTIME
    from finetune.train.layout import load_job

    plan = build_plan(
        "smoke-resnet18-torch", dataset, overrides=[f"model.name={model}", *overrides]
    )
    tree = layout(root, plan)
    assert RUNTIME.fit(load_job(Layout(tree))).stopped_by is None
    lines = (tree / "output" / "data" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["val_acc"] for line in lines]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=int, default=7)
    parser.add_argument("--source-per-class", type=int, default=80)
    parser.add_argument("--target-train", type=int, default=20)
    parser.add_argument("--pretrain-epochs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0, help="the pre-training run's train.seed")
    parser.add_argument("--ft-lr", type=float, default=0.001)
    parser.add_argument("--head-lr-mult", type=float, default=5)
    parser.add_argument("--ft-augmentation", default="crop")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args(argv)
    pre_args = [*COMMON, f"epochs={args.pretrain_epochs}", "lr_per_device=0.002",
                "pretrained=false", f"seed={args.seed}"]  # fmt: skip
    fine_args = [*COMMON, "epochs=1", f"lr_per_device={args.ft_lr}",
                 f"head_lr_mult={args.head_lr_mult}",
                 f"augmentation={args.ft_augmentation}"]  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="timm-digits-"))
    sets = tasks(root, args)
    for model in args.models.split(","):
        work, cpu, wall = root / model.replace("/", "_"), time.process_time(), time.time()
        pre = train(work / "pre", sets["source"], model, pre_args)
        weights = work / "pre" / "model" / "model.pt"
        fine = train(work / "fine", sets["target"], model,
                     [*fine_args, "pretrained=true", f"weights={weights}"])  # fmt: skip
        scratch = train(work / "scratch", sets["target"], model, [*fine_args, "pretrained=false"])
        print(json.dumps({"model": model, "pre_trained": round(pre[-1], 3),
                          "fine_tuned": round(fine[0], 3), "scratch": round(scratch[0], 3),
                          "gain": round(fine[0] - scratch[0], 3),
                          "cpu_s": round(time.process_time() - cpu, 1),
                          "wall_s": round(time.time() - wall, 1)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
