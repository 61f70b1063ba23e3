"""Benchmark: `finetune prepare folder` against MXNet's own im2rec, in the same run.

    .venv/bin/python benchmarks/prepare_vs_im2rec.py [--images 2000] [--workers 2]

Both tools get the same images (a generated Caltech-style set, shorter sides 200-800 px),
the same --resize 256 --quality 95 and the same number of workers; each is timed as a whole
command, start-up included. im2rec is timed twice: its packing step alone, and list + pack
(what `prepare` does). Then mx.io.ImageRecordIter reads both training .rec files with the
same settings, to show the outputs are equally fast to train from. Target: >= 1.5x.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _gen_class(args):
    from finetune.data.synth import render

    root, label, n_classes, per_class, seed = args
    import random

    from finetune.data.synth import class_names

    name = class_names(n_classes)[label]
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{seed}:{name}")
    for i in range(per_class):
        short = rng.randint(200, 800)
        long = int(short * rng.uniform(4 / 3, 16 / 9))
        w, h = (long, short) if rng.random() < 0.7 else (short, long)
        render(label, n_classes, rng, w, h).save(folder / f"{i:04d}.jpg", quality=90)


def make_images(root: Path, images: int, classes: int = 20) -> Path:
    marker = root / f".complete-{images}"
    if marker.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    per_class = -(-images // classes)
    with mp.Pool() as pool:
        pool.map(_gen_class, [(root, c, classes, per_class, 0) for c in range(classes)])
    marker.touch()
    return root


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def read_speed(rec: Path, threads: int) -> float:
    import mxnet as mx

    it = mx.io.ImageRecordIter(
        path_imgrec=str(rec),
        data_shape=(3, 224, 224),
        batch_size=32,
        rand_crop=True,
        rand_mirror=True,
        preprocess_threads=threads,
        round_batch=False,
    )
    n, start = 0, None
    for i, batch in enumerate(it):
        if i == 2:
            start = time.perf_counter()
        if start is not None:
            batch.data[0].wait_to_read()
            n += batch.data[0].shape[0] - batch.pad
    return n / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--work", type=Path, default=ROOT / ".bench" / "prepare")
    args = ap.parse_args()
    py = sys.executable
    images = make_images(args.work / "images", args.images)
    n = sum(1 for _ in images.rglob("*.jpg"))
    print(f"{n} JPEGs, shorter sides 200-800 px, {args.workers} workers, {os.cpu_count()} CPUs")

    ours_out = args.work / "ours"
    shutil.rmtree(ours_out, ignore_errors=True)
    t_ours = timed(
        [
            py,
            "-m",
            "finetune",
            "prepare",
            "folder",
            str(images),
            "--out",
            str(ours_out),
            "--val-ratio",
            "0.2",
            "--resize",
            "256",
            "--quality",
            "95",
            "--workers",
            str(args.workers),
        ]
    )

    ref = args.work / "im2rec"
    shutil.rmtree(ref, ignore_errors=True)
    ref.mkdir(parents=True)
    prefix = str(ref / "bench")
    t_list = timed(
        [
            py,
            "-m",
            "mxnet.tools.im2rec",
            "--list",
            "--recursive",
            "--train-ratio",
            "0.8",
            prefix,
            str(images),
        ]
    )
    t_pack = timed(
        [
            py,
            "-m",
            "mxnet.tools.im2rec",
            "--resize",
            "256",
            "--quality",
            "95",
            "--num-thread",
            str(args.workers),
            prefix,
            str(images),
        ]
    )

    r_ours, r_pack, r_all = n / t_ours, n / t_pack, n / (t_list + t_pack)
    print(f"finetune prepare      {t_ours:7.2f} s  {r_ours:7.0f} img/s")
    print(f"im2rec pack only      {t_pack:7.2f} s  {r_pack:7.0f} img/s")
    print(f"im2rec list + pack    {t_list + t_pack:7.2f} s  {r_all:7.0f} img/s")
    print(f"ratio vs im2rec pack        {r_ours / r_pack:.2f}x   (target >= 1.5x)")
    print(f"ratio vs im2rec list+pack   {r_ours / r_all:.2f}x")

    threads = max(1, (os.cpu_count() or 2))
    s_ours = read_speed(ours_out / "images_train.rec", threads)
    s_ref = read_speed(ref / "bench_train.rec", threads)
    print(
        f"ImageRecordIter read: ours {s_ours:.0f} img/s, im2rec's {s_ref:.0f} img/s, "
        f"ratio {s_ours / s_ref:.2f}x (target ~1.0x)"
    )


if __name__ == "__main__":
    main()
