"""Benchmark: the PyTorch engine against a bare PyTorch loop on the same model, same run.

    .venv/bin/python benchmarks/engine_overhead.py [--model resnet18] [--image-size 64]
        [--batch 16] [--batches 40] [--path resident] [--repeats 3] [--compile]

Both sides train the same torchvision network (random init, the engine's CPU layout from
hardware.memory_format, SGD momentum 0.9, fp32 on a CPU) with the same batch size and thread
count. The engine runs a whole `finetune.train` job in-process on a temporary /opt/ml tree
around a generated, prepared dataset (our RecordIO reader, images decoded once and kept in
memory, crops/flips/normalising per step, metrics, checkpoints); its images/s is the
samples_per_sec of its metrics event (after its warm-up batches). The reference feeds one
in-memory tensor of the same shape to a plain forward/backward/step loop. Each side runs
--repeats times, alternating; it prints best vs best and the median ratio of back-to-back
pairs. Target: engine / bare >= 0.9 (>= 0.95 with ``--compile``: both sides torch.compile the
network, ``dynamic=False``; the compile lands in the warm-up batches of each side and out of
images/s).
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

from benchmarks.train_overhead import compare, make_dataset, make_tree  # noqa: E402


def hyperparameters(args, train_count: int):
    from finetune.contracts.hparams import TrainHyperparameters

    return TrainHyperparameters(
        engine="torch",
        model=args.model,
        pretrained=False,
        num_classes=8,
        num_training_samples=train_count,
        image_size=args.image_size,
        epochs=1,
        batch_per_device=args.batch,
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
        data_path=args.path,
        loader_workers=args.workers,
        compile=args.compile,
    )


def engine_rate(work: Path, dataset: Path, hp, run: int) -> float:
    from finetune.contracts.container import Layout
    from finetune.train.engines.torch import RUNTIME
    from finetune.train.layout import load_job

    root = make_tree(work / f"ml-{run}", dataset, hp)
    result = RUNTIME.fit(load_job(Layout(root)))
    return result.progress.events[-1]["samples_per_sec"]


def bare_rate(args) -> float:
    """The same network and optimizer on one in-memory batch: the ceiling here."""
    import torch
    from torchvision import models

    from finetune.train.engines.torch.hardware import memory_format

    layout = memory_format(torch.device("cpu"), model=args.model)  # the engine's, on a CPU
    torch.manual_seed(0)
    net = models.get_model(args.model, weights=None, num_classes=8)
    net = net.to(memory_format=layout).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    fwd = torch.compile(net, dynamic=False) if args.compile else net
    x = torch.rand(args.batch, 3, args.image_size, args.image_size) * 255
    x = ((x - 120.0) / 58.0).contiguous(memory_format=layout)
    y = torch.arange(args.batch) % 8
    for i in range(args.warmup + args.batches):
        if i == args.warmup:
            start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return args.batches * args.batch / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--batches", type=int, default=40, help="timed batches")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--path", choices=("resident", "stream"), default="resident")
    p.add_argument("--workers", type=int, default=-1, help="stream: loader processes")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compile", action="store_true", help="torch.compile both sides")
    args = p.parse_args()

    import logging

    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="finetune-bench-") as tmp:
        work = Path(tmp)
        per_class = -(-(args.warmup + args.batches) * args.batch // 8) + 8
        dataset = make_dataset(work, args.image_size, per_class)
        manifest = json.loads((dataset / "manifest.json").read_text())
        hp = hyperparameters(args, manifest["splits"]["train"]["count"])
        engine, bare = [], []
        for run in range(args.repeats):
            bare.append(bare_rate(args))
            engine.append(engine_rate(work, dataset, hp, run))
    setup = f"{args.model}, {args.image_size} px, batch {args.batch}, {args.batches} timed batches"
    print(f"model {setup}, {args.path} data path, compile {'on' if args.compile else 'off'}")
    compare(("bare torch loop (in-memory data)", bare), (f"engine (.rec, {args.path})", engine))


if __name__ == "__main__":
    main()
