"""Benchmark: the training engine reading a real .rec against a bare Gluon loop, same run.

    .venv/bin/python benchmarks/train_overhead.py [--model resnet18_v1] [--image-size 64]
        [--batch 16] [--batches 40] [--devices 1] [--repeats 3]

Both sides train the same model-zoo network (random init, hybridized, same optimizer) with
the same batch size on the same CPU contexts. The engine runs a whole `finetune.train` job
in-process on a temporary /opt/ml tree around a generated, prepared dataset (ImageRecordIter
decoding JPEGs with augmentation, split_and_load, kvstore, metrics, checkpoints); its images/s
is the samples_per_sec of its metrics event (after its warm-up batches). The reference feeds
in-memory NDArrays of the same shape to a plain autograd loop. Each side runs --repeats
times, alternating; it prints best vs best and the median ratio of back-to-back pairs (less
sensitive to other load on the machine). Target: engine / bare >= 0.9.
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


def make_dataset(work: Path, image_size: int, images_per_class: int) -> Path:
    """8 classes of generated shapes, prepared with the shorter side a little above the
    training crop (as `prepare --resize 256` is for 224)."""
    from finetune.data.datasets import prepare_folder
    from finetune.data.synth import SynthSpec, generate

    spec = SynthSpec(
        classes=8, per_class=images_per_class, min_side=image_size, max_side=2 * image_size
    )
    generate(work / "images", spec)
    out = work / "prepared"
    params = dict(val_ratio=0.1, resize=round(image_size * 256 / 224), quality=90)
    prepare_folder(work / "images", out, "bench", params)
    return out


def make_tree(root: Path, dataset: Path, hp) -> Path:
    config = root / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(hp.to_strings()))
    for channel in ("train", "validation"):
        (root / "input" / "data").mkdir(parents=True, exist_ok=True)
        (root / "input" / "data" / channel).symlink_to(dataset)
    return root


def hyperparameters(args, train_count: int):
    from finetune.contracts.hparams import TrainHyperparameters

    return TrainHyperparameters(
        model=args.model,
        pretrained=False,
        num_classes=8,
        num_training_samples=train_count,
        image_size=args.image_size,
        epochs=1,
        batch_per_device=args.batch // args.devices,
        devices_per_host=args.devices,
        global_batch=args.batch,
        optimizer="sgd",
        lr_per_device=0.01,
        lr=0.01,
        lr_schedule="constant",
        device="cpu",
        top_k=0,
        warmup_batches=args.warmup,
        max_batches_per_epoch=args.warmup + args.batches,
        checkpoint_interval_s=1e9,
    )


def engine_rate(work: Path, dataset: Path, hp, run: int) -> float:
    from finetune.contracts.container import Layout
    from finetune.train.engines.mxnet import RUNTIME
    from finetune.train.layout import load_job

    root = make_tree(work / f"ml-{run}", dataset, hp)
    result = RUNTIME.fit(load_job(Layout(root)))
    return result.progress.events[-1]["samples_per_sec"]


def bare_rate(args) -> float:
    """The same network, optimizer and contexts on in-memory data: the ceiling here."""
    import mxnet as mx
    from mxnet import autograd, gluon

    from finetune.train.engines.mxnet.zoo import model_zoo

    contexts = [mx.cpu(i) for i in range(args.devices)]
    net = model_zoo().get_model(args.model, pretrained=False, classes=8)
    net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2), ctx=contexts)
    net.hybridize(static_alloc=True, static_shape=True)
    opt = {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4}
    trainer = gluon.Trainer(net.collect_params(), "sgd", opt, kvstore="device")
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x = mx.nd.random.uniform(shape=(args.batch, 3, args.image_size, args.image_size))
    xs = gluon.utils.split_and_load(x, contexts)
    ys = gluon.utils.split_and_load(mx.nd.array([i % 8 for i in range(args.batch)]), contexts)
    for i in range(args.warmup + args.batches):
        if i == args.warmup:
            mx.nd.waitall()
            start = time.perf_counter()
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xs, ys, strict=True)]
        autograd.backward(losses)
        trainer.step(args.batch)
    mx.nd.waitall()
    return args.batches * args.batch / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18_v1")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--batches", type=int, default=40, help="timed batches")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--devices", type=int, default=1, help="CPU contexts (both sides)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    import logging

    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="finetune-bench-") as tmp:
        work = Path(tmp)
        per_class = -(-(args.warmup + args.batches) * args.batch // 8) + 8
        dataset = make_dataset(work, args.image_size, per_class)
        train_count = json.loads((dataset / "manifest.json").read_text())["splits"]["train"][
            "count"
        ]
        hp = hyperparameters(args, train_count)
        engine, bare = [], []
        for run in range(args.repeats):
            bare.append(bare_rate(args))
            engine.append(engine_rate(work, dataset, hp, run))
    setup = f"{args.model}, {args.image_size} px, batch {args.batch}, {args.batches} timed batches"
    print(f"model {setup}")
    compare(("bare gluon loop (in-memory data)", bare), ("engine (ImageRecordIter, .rec)", engine))


def compare(reference: tuple[str, list[float]], engine: tuple[str, list[float]]) -> None:
    """Best images/s of each side, and the ratio (best vs best, median of run pairs)."""
    for label, rates in (reference, engine):
        print(f"{label + ':':34s}{max(rates):8.1f} img/s  runs {[round(r, 1) for r in rates]}")
    pairs = sorted(e / b for e, b in zip(engine[1], reference[1], strict=True))
    print(
        f"ratio engine / bare: {max(engine[1]) / max(reference[1]):.3f} best vs best, "
        f"{pairs[len(pairs) // 2]:.3f} median of back-to-back pairs  (target >= 0.9)"
    )


if __name__ == "__main__":
    main()
