"""Benchmark: images/s one CPU core decodes through the torch engine's streaming path -- the
per-core rate the performance model's data-pipeline cap multiplies by an instance's vCPUs.

    PYTHONPATH=. .venv/bin/python benchmarks/decode_rate.py [--images 300] [--repeats 3]

It writes ``--images`` JPEGs of 341 x 256 px (what `prepare --resize 256` stores; smooth
gradients plus noise, quality 95) into a .rec with our RecordIO writer, then times
streaming.RecordDataset (our reader, Pillow decode, shorter-side resize, random 224 crop,
flip, normalise: the engine's per-epoch work) in this one process, best of ``--repeats``.
Reference in the same run: the bare Pillow decode of the same bytes, so the printed ratio
says how much of the per-image time is the decode itself. One JSON line; the figure goes
into finetune/estimate/perf/pipeline.csv with the date and this machine's CPU.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def write_rec(folder: Path, count: int) -> tuple[Path, Path, list[bytes]]:
    """A .rec/.idx of ``count`` generated 341 x 256 JPEGs, and the JPEG bytes."""
    import numpy as np
    from PIL import Image

    from finetune.data.recordio import IRHeader, RecordWriter, pack_header

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:256, 0:341]
    jpegs = []
    rec, idx = folder / "bench.rec", folder / "bench.idx"
    with RecordWriter(rec, idx) as writer:
        for i in range(count):
            base = (xx * (i % 7 + 1) + yy * (i % 5 + 1)) % 256
            pixels = np.stack([base, 255 - base, (base * 3) % 256], axis=2)
            pixels = np.clip(pixels + rng.normal(0, 12, pixels.shape), 0, 255).astype("uint8")
            buf = io.BytesIO()
            Image.fromarray(pixels).save(buf, format="JPEG", quality=95)
            jpegs.append(buf.getvalue())
            writer.write(pack_header(IRHeader(0, float(i % 10), i), jpegs[-1]), key=i)
    return rec, idx, jpegs


def best_rate(fn, count: int, repeats: int) -> float:
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = max(best, count / (time.perf_counter() - start))
    return best


def main() -> None:
    import torch

    from finetune.train.engines.torch.resident import pil_decode
    from finetune.train.engines.torch.streaming import RecordDataset
    from finetune.train.preprocess import Preprocessing, resize_for

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--images", type=int, default=300)
    args.add_argument("--repeats", type=int, default=3)
    a = args.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        rec, idx, jpegs = write_rec(Path(tmp), a.images)
        contract = Preprocessing(image_size=224, resize_shorter=resize_for(224))
        data = RecordDataset(rec, idx, contract, train=True, seed=0)
        data[(0, 0)]  # open the reader, import what decoding imports
        engine = best_rate(lambda: [data[(i, 1)] for i in range(len(data))], a.images, a.repeats)
        bare = best_rate(lambda: [pil_decode(j) for j in jpegs], a.images, a.repeats)
    print(json.dumps({
        "benchmark": "decode_rate", "path": "torch streaming (Pillow decode, resize, crop)",
        "images": a.images, "per_core_images_per_sec": round(engine, 1),
        "reference_bare_decode_images_per_sec": round(bare, 1),
        "ratio": round(engine / bare, 3), "cpu": platform.processor() or platform.machine(),
        "date": time.strftime("%Y-%m-%d"),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
