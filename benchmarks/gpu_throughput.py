"""Benchmark: the PyTorch engine's images/s on a GPU against the same model on in-memory data.

    .venv/bin/python benchmarks/gpu_throughput.py                  # on a GPU: the full grid
    .venv/bin/python benchmarks/gpu_throughput.py --tiny           # any machine, seconds
    .venv/bin/python benchmarks/gpu_throughput.py --caltech        # end-to-end, wall clock

Grid (one JSON line per configuration): ResNet-50 and ResNet-152, 224 px, batch 256 per GPU,
bf16 autocast, channels_last, fed from a real .rec of generated 256 px JPEGs (finetune's
prepare and RecordIO code) --

- ``reference``: the network alone on one in-memory batch (forward, backward, SGD step) in a
  fresh process (benchmarks.reference_loop): the ceiling, measured in the same run; compile
  time (first compiled step minus a steady one) is reported as ``compile_s`` and kept out of
  images/s;
- ``engine``: a whole ``finetune.train`` job in-process through the GPU-resident path and
  through the streaming path, torch.compile off and on; images/s is its metrics event's
  samples_per_sec (after the warm-up batches, where compilation happens), with the engine's
  own telemetry (input wait, achieved TFLOP/s, % of the dense peak, NVML utilisation);
  ``ratio`` = engine / reference of the same model and compile setting;
- ``data``: the data path alone (resident crops on the device; streaming loader workers
  decoding and copying to the device); ``ratio`` = data / the model's reference rate
  (target >= 2).

``--caltech``: 15,420 training images (Caltech-256's 60 per class x 257 classes), 6 epochs,
ResNet-50, through ``python -m finetune.train`` in a subprocess: wall clock including
start-up (dataset generation excluded); ``ratio`` = wall clock / the 60 s target.

Without CUDA the run is tiny (``--tiny`` is implied: 32 px, batch 4, a few batches, compile
off, fp32) so the script keeps working; such figures say nothing about a GPU. Targets on one
H100 (issue 11): ResNet-50 >= 5,000 img/s, ResNet-152 >= 2,000 img/s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.train_overhead import make_tree  # noqa: E402


def make_dataset(work: Path, side: int, train: int, val: int, classes: int = 8) -> Path:
    """Generated JPEGs prepared to a .rec with the shorter side ``side`` (256 for 224 crops)."""
    from finetune.data.datasets import prepare_folder
    from finetune.data.synth import SynthSpec, generate

    per_class = -(-(train + val) // classes)
    spec = SynthSpec(classes=classes, per_class=per_class, min_side=side, max_side=side * 4 // 3)
    generate(work / "images", spec, workers=_cores())  # (prepare uses every core too)
    out = work / "prepared"
    params = dict(train_per_class=train // classes, resize=side, quality=90)
    prepare_folder(work / "images", out, "bench", params)
    return out


def hyperparameters(a, model: str, train_count: int, classes: int, **extra):
    from finetune.contracts.hparams import TrainHyperparameters

    return TrainHyperparameters(
        engine="torch", model=model, pretrained=False, num_classes=classes,
        num_training_samples=train_count, image_size=a.image_size, epochs=a.epochs,
        batch_per_device=a.batch, global_batch=a.batch, optimizer="sgd",
        lr_per_device=0.1, lr=0.1, lr_schedule="constant", top_k=0, warmup_batches=a.warmup,
        checkpoint_interval_s=1e9, precision=a.precision, loader_workers=a.workers,
        max_batches_per_epoch=a.warmup + a.batches if a.batches else 0, **extra,
    )  # fmt: skip


def reference(a, model: str, compiled: bool, classes: int = 8) -> dict:
    """The network alone on one in-memory batch, in a fresh process (benchmarks.reference_loop:
    no Dynamo state from the engine jobs, ``dynamic=False``, CUDA events around the timed
    steps): images/s and compile seconds."""
    from benchmarks.reference_loop import fresh

    row = fresh("reference", model, classes, a.batch, a.image_size, a.precision, compiled,
                a.warmup, a.batches)  # fmt: skip
    return {"images_per_s": row["images_per_s"], "compile_s": row["compile_s"]}


def engine(a, dataset: Path, work: Path, model: str, path: str, compiled: bool) -> dict:
    """A whole finetune.train job in-process; its first metrics event."""
    from finetune.contracts.container import Layout
    from finetune.train.engines.torch import RUNTIME
    from finetune.train.layout import load_job

    manifest = json.loads((dataset / "manifest.json").read_text())
    hp = hyperparameters(a, model, manifest["splits"]["train"]["count"], 8,
                         data_path=path, compile=compiled)  # fmt: skip
    root = make_tree(work / f"ml-{model}-{path}-{int(compiled)}", dataset, hp)
    RUNTIME.fit(load_job(Layout(root)))
    event = json.loads((root / "output/data/metrics.jsonl").read_text().splitlines()[0])
    keep = ("samples_per_sec", "input_wait_fraction", "data_bound", "achieved_tflops",
            "peak_tflops", "pct_of_peak", "gpu_util_pct", "gpu_mem_gib")  # fmt: skip
    return {k: event.get(k) for k in keep}


def data_alone(a, dataset: Path, path: str) -> float:
    """Images/s of the data path by itself, batches ending on the device."""
    import torch

    from finetune.train.engines.torch import boxes, streaming, validation
    from finetune.train.engines.torch.resident import ImageStore
    from finetune.train.preprocess import Preprocessing

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    manifest = json.loads((dataset / "manifest.json").read_text())
    contract = Preprocessing.from_hparams(
        hyperparameters(a, "resnet50", manifest["splits"]["train"]["count"], 8)
    )
    rec, idx = dataset / "bench_train.rec", dataset / "bench_train.idx"
    n = a.warmup + a.batches
    if path == "resident":
        store = ImageStore.load(rec, idx, contract, dev)
        g = boxes.generator(0, 0)
        for i in range(n):
            if i == a.warmup:
                _sync(dev)
                started = time.perf_counter()
            index = torch.randint(len(store), (a.batch,), generator=g)
            box = boxes.train(store.host_widths[index], store.host_heights[index], contract, g)
            flip, size = boxes.flips(a.batch, contract, g), contract.image_size
            if store.exact(index, box, size):  # as the engine does: no copy back per batch
                out = validation.to_input(store.copies(index, box, size, flip), contract)
            else:
                out = store.crops(index, box, size, flip)
        _sync(dev)
        return a.batches * a.batch / (time.perf_counter() - started)
    data = streaming.RecordDataset(rec, idx, contract, True, 0)
    batches = [[(i * a.batch + j) % len(data) for j in range(a.batch)] for i in range(n)]
    workers = a.workers if a.workers >= 0 else _cores()
    loader = streaming.loader(data, batches, 0, workers, dev.type == "cuda")
    for i, (x, _) in enumerate(loader):
        if i == a.warmup:
            _sync(dev)
            started = time.perf_counter()
        out = x.to(dev, non_blocking=True)
    del out
    _sync(dev)
    return a.batches * a.batch / (time.perf_counter() - started)


def caltech(a, work: Path) -> dict:
    """The Caltech-256-sized job end to end: wall clock of ``python -m finetune.train``."""
    import os

    dataset = make_dataset(work, a.side, 15_420, 2_570, classes=257)
    manifest = json.loads((dataset / "manifest.json").read_text())
    a.batches = 0  # whole epochs
    hp = hyperparameters(a, "resnet50", manifest["splits"]["train"]["count"], 257,
                         data_path="resident")  # fmt: skip
    root = make_tree(work / "ml-caltech", dataset, hp)
    env = dict(os.environ, FINETUNE_ML_ROOT=str(root), PYTHONPATH=str(ROOT))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "finetune.train"], env=env, cwd=ROOT)
    wall = time.perf_counter() - started
    events = [json.loads(x) for x in (root / "output/data/metrics.jsonl").read_text().split()]
    return {"config": "caltech256-sized end to end", "exit_code": proc.returncode,
            "wall_s": wall, "ratio": wall / 60.0, "epochs": len(events),
            "val_acc": events[-1]["val_acc"] if events else None}  # fmt: skip


def _sync(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


def _emit(line: dict) -> None:
    print(json.dumps(line), flush=True)


def main() -> None:
    import logging

    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="tiny sizes (implied without CUDA)")
    p.add_argument("--caltech", action="store_true", help="the end-to-end wall-clock run")
    p.add_argument("--models", default="resnet50,resnet152")
    p.add_argument("--paths", default="resident,stream")
    p.add_argument("--compile", default="off,on", help="off, on, or off,on")
    p.add_argument("--batches", type=int, default=30, help="timed batches")
    p.add_argument("--workers", type=int, default=-1, help="streaming loader processes")
    a = p.parse_args()
    gpu = torch.cuda.is_available()
    a.tiny = a.tiny or not gpu
    a.image_size, a.side, a.batch, a.warmup = (32, 40, 4, 2) if a.tiny else (224, 256, 256, 5)
    a.precision = "bf16" if gpu else "fp32"
    a.epochs = 6 if a.caltech else 1
    if a.tiny:
        a.batches, a.compile, a.workers = min(a.batches, 3), "off", max(a.workers, 1)
    logging.basicConfig(level=logging.WARNING)
    device = torch.cuda.get_device_name(0) if gpu else "cpu (tiny: no GPU figures)"
    _emit({"device": device, "torch": torch.__version__, "batch": a.batch,
           "image_size": a.image_size, "precision": a.precision})  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="finetune-gpu-bench-") as tmp:
        work = Path(tmp)
        if a.caltech:
            _emit(caltech(a, work))
            return
        train = (a.warmup + a.batches + 1) * a.batch
        dataset = make_dataset(work, a.side, train, max(a.batch, 16))
        for model in a.models.split(","):
            for compiled in (c == "on" for c in a.compile.split(",")):
                ref = reference(a, model, compiled)
                _emit({"config": f"{model} reference compile={compiled}", **ref, "ratio": 1.0})
                for path in a.paths.split(","):
                    got = engine(a, dataset, work, model, path, compiled)
                    rate = got.pop("samples_per_sec")
                    name = f"{model} engine {path} compile={compiled}"
                    ratio = rate / ref["images_per_s"]
                    _emit({"config": name, "images_per_s": rate, "ratio": ratio, **got})
            for path in a.paths.split(","):
                rate = data_alone(a, dataset, path)
                ratio = rate / ref["images_per_s"]
                against = f"{model} reference"
                _emit({"config": f"data path {path} alone", "images_per_s": rate,
                       "ratio": ratio, "against": against})  # fmt: skip


if __name__ == "__main__":
    main()
