"""The steps of ``python -m benchmarks.gpu_check`` (one GPU), each a function of the check's
context returning a dict; a step that cannot run here raises Skip with the reason, which the
report names. Every step also runs on a CPU at toy sizes (``--cpu-dry``), so the suite keeps
them working; only what truly needs CUDA is skipped there.
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import reference_loop
from benchmarks.gpu_throughput import _sync, hyperparameters, make_dataset
from benchmarks.train_overhead import make_tree

# nvjpeg (the resident path's decoder on a GPU) against Pillow (the streaming path's decoder,
# the preprocessing contract's reference), in two parts:
# - 4:4:4 JPEGs (no chroma subsampling): only the inverse DCT and the colour conversion differ;
#   each decoder's integer IDCT is within 1-2 levels of the exact one, so two of them are within
#   4 everywhere (measured 2026-11-26: "±1-2" on 4:4:4). More is a decoder bug.
DECODE_444_MAX_ABS = 4
# - the prepared set (Pillow's default 4:2:0): nvjpeg upsamples chroma by nearest neighbour,
#   libjpeg-turbo by "fancy" (triangular) interpolation, so values differ by tens of levels
#   along colour edges and by IDCT rounding elsewhere; measured mean 0.40 on the synthetic set
#   (H200, 2026-11-26). Mean <= 1.0: the edges of a busier image set fit, a wrong colour
#   conversion or a shifted plane (mean tens of levels) does not.
DECODE_420_MEAN_MAX = 1.0
DECODE_444_IMAGES = 64  # re-encoded at 4:4:4 from the set's own images

# one-process DDP against the plain model: with TF32 off and deterministic cuDNN algorithms
# the two backward passes run the same kernels on the same numbers, and DDP's all-reduce over
# one process divides by 1, so the gradients are equal; 1e-6 allows no kernel difference
# (TF32 and atomic-order noise measured 8.5e-5 on an H200, 2026-11-26)
DDP_MAX_ABS_DIFF = 1e-6

# MLPerf Training v4.0 (2024, the last round with ResNet-50): 8 x H100, NVIDIA's
# eos_ngc24.04_mxnet submission (MXNet + DALI, batch 400 per GPU), ~57,250 img/s.
MLPERF_RESNET50_H100 = {
    "images_per_s_per_gpu": 7156,
    "source": "MLPerf Training v4.0, 8 x H100 (NVIDIA eos_ngc24.04_mxnet, MXNet + DALI, "
    "batch 400/GPU): about 57,250 img/s = 7,156 per GPU; a tuned record, not a plain loop",
}
DRY_GPU = "H100 SXM"  # the GPU the model's prediction is shown for when there is none


class Skip(Exception):
    """This step (or part) cannot run here; the message says why."""


@dataclass
class Context:
    """What the steps share: sizes (``a``, as benchmarks.gpu_throughput takes them), the
    device, the work folder and the generated dataset."""

    a: object
    gpu: bool
    work: Path
    classes: int
    dataset: Path | None = None
    device_name: str | None = None


def environment(ctx: Context) -> dict:
    """Versions, the device, and the GPU's dense peaks as finetune's catalog knows them."""
    import torch
    import torchvision

    from finetune.catalog import gpu_peaks

    peak = gpu_peaks.lookup(ctx.device_name)
    return {
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda,
        "device": ctx.device_name or "cpu",
        "catalog_gpu": peak.model if peak else None,
        "bf16_peak_tflops": peak.bf16 if peak else None,
    }


def dataset(ctx: Context) -> dict:
    """Generated JPEGs prepared by finetune into a .rec (Caltech-256-sized on a GPU)."""
    a = ctx.a
    started = time.perf_counter()
    ctx.dataset = make_dataset(ctx.work, a.side, a.train, a.val, classes=ctx.classes)
    manifest = json.loads((ctx.dataset / "manifest.json").read_text())
    counts = {k: v["count"] for k, v in manifest["splits"].items()}
    return {"classes": ctx.classes, "counts": counts, "side": a.side,
            "seconds": time.perf_counter() - started}  # fmt: skip


def engine_run(ctx: Context, path: str, compiled: bool) -> dict:
    """A whole finetune.train job in-process: its metrics event and run record."""
    from finetune.contracts.container import Layout
    from finetune.train.engines.torch import RUNTIME
    from finetune.train.layout import load_job

    # whole epochs on a GPU (engine_batches 0), a batch or two at toy sizes
    a = argparse.Namespace(**{**vars(ctx.a), "batches": ctx.a.engine_batches})
    manifest = json.loads((ctx.dataset / "manifest.json").read_text())
    hp = hyperparameters(a, a.model, manifest["splits"]["train"]["count"], ctx.classes,
                         data_path=path, compile=compiled)  # fmt: skip
    root = make_tree(ctx.work / f"ml-{path}-{int(compiled)}", ctx.dataset, hp)
    started = time.perf_counter()
    RUNTIME.fit(load_job(Layout(root)))
    wall = time.perf_counter() - started
    out = root / "output" / "data"
    event = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    record = json.loads((out / "run-record.json").read_text())
    keep = ("samples_per_sec", "train_acc", "val_acc", "input_wait_fraction",
            "input_device_fraction", "data_bound", "achieved_tflops", "pct_of_peak",
            "gpu_util_pct", "gpu_mem_gib", "warmup_seconds", "validation_seconds",
            "epoch_seconds")  # fmt: skip
    return {"model": a.model, "data_path": path, "compile": compiled, "wall_s": wall,
            "precision_asked": a.precision, "precision_used": record.get("precision"),
            "model_written": (root / "model").is_dir() and any((root / "model").iterdir()),
            **{k: event.get(k) for k in keep}}  # fmt: skip


def decode(ctx: Context) -> dict:
    """The resident path's decoder (nvjpeg on a GPU, batched) against Pillow's: on 4:4:4
    re-encodings of the dataset's images (IDCT only: max |diff| <= DECODE_444_MAX_ABS) and on
    the dataset's own 4:2:0 JPEGs (mean |diff| <= DECODE_420_MEAN_MAX)."""
    import io

    import torch

    from finetune.data.recordio import RecordReader, unpack_header
    from finetune.train.engines.torch.resident import pil_decode

    rec = next(ctx.dataset.glob("*_train.rec"))
    reader = RecordReader(rec, rec.with_suffix(".idx"))
    payloads = [unpack_header(reader.read_key(k))[1] for k in reader.keys[: ctx.a.decode_n]]
    full = []
    for payload in payloads[:DECODE_444_IMAGES]:
        out = io.BytesIO()
        pil_decode(payload).convert("RGB").save(out, "JPEG", quality=90, subsampling=0)
        full.append(out.getvalue())
    device = "cuda" if ctx.gpu else "cpu"
    d420, seconds = _decode_diffs(payloads, device, rec)
    d444, _ = _decode_diffs(full, device, rec)
    ok = int(d444.max()) <= DECODE_444_MAX_ABS and float(d420.mean()) <= DECODE_420_MEAN_MAX
    _sync(torch.device(device))
    return {"decoder": "nvjpeg (torchvision.io.decode_jpeg, device=cuda)" if ctx.gpu
            else "torchvision CPU decode (the resident path on a CPU)",
            "against": "Pillow (the streaming path's decoder)", "images": len(payloads),
            "images_per_s": len(payloads) / seconds, "mean_abs_diff": float(d420.mean()),
            "max_abs_diff": int(d420.max()), "share_within_8": float((d420 <= 8).mean()),
            "images_444": len(full), "max_abs_diff_444": int(d444.max()),
            "mean_abs_diff_444": float(d444.mean()),
            "tolerance": {"max_abs_diff_444": DECODE_444_MAX_ABS,
                          "mean_abs_diff_420_max": DECODE_420_MEAN_MAX},
            "within_tolerance": ok}  # fmt: skip


def _decode_diffs(payloads: list[bytes], device: str, rec: Path):
    """|ours - Pillow's| of every value of ``payloads``, and the seconds our decode took."""
    import numpy as np
    import torch

    from finetune.train.engines.torch.resident import _decode, pil_decode

    _sync(torch.device(device))
    started = time.perf_counter()
    ours = _decode(payloads, device, rec)
    _sync(torch.device(device))
    seconds = time.perf_counter() - started
    diffs = []
    for payload, image in zip(payloads, ours, strict=True):
        want = np.asarray(pil_decode(payload).convert("RGB"), dtype=np.int16)
        got = image.cpu().permute(1, 2, 0).numpy().astype(np.int16)
        diffs.append(np.abs(got - want).ravel())
    return np.concatenate(diffs), seconds


def ddp(ctx: Context) -> dict:
    """One-process DistributedDataParallel (NCCL on a GPU; gloo on a CPU): its gradients equal
    the plain model's, and an all-reduce returns the one process's value."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torchvision import models

    dev = torch.device("cuda" if ctx.gpu else "cpu")
    backend = "nccl" if ctx.gpu else "gloo"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    flags = _deterministic() if ctx.gpu else None
    try:
        torch.manual_seed(0)
        plain = models.resnet18(num_classes=8).to(dev)
        twin = models.resnet18(num_classes=8).to(dev)
        twin.load_state_dict(plain.state_dict())
        wrapped = DistributedDataParallel(twin, device_ids=[0] if ctx.gpu else None)
        x = torch.randn(8, 3, 32, 32, device=dev)
        y = torch.arange(8, device=dev) % 8
        for net in (plain, wrapped):
            torch.nn.functional.cross_entropy(net(x), y).backward()
        pairs = list(zip(plain.parameters(), twin.parameters(), strict=True))
        worst = max(float((p.grad - q.grad).abs().max()) for p, q in pairs)
        same = worst <= DDP_MAX_ABS_DIFF
        t = torch.full((4,), 3.0, device=dev)
        dist.all_reduce(t)
        _sync(dev)
        return {"backend": backend, "world_size": dist.get_world_size(),
                "max_grad_diff": worst, "all_reduce_ok": bool((t == 3.0).all()),
                "deterministic": ctx.gpu, "tolerance": DDP_MAX_ABS_DIFF,
                "grads_match": same}  # fmt: skip
    finally:
        if flags is not None:
            _restore(flags)
        dist.destroy_process_group()


def _deterministic() -> tuple:
    """TF32 off and deterministic cuDNN algorithms; returns the settings to restore."""
    import torch

    b = torch.backends
    old = (b.cudnn.deterministic, b.cudnn.benchmark, b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32)
    b.cudnn.deterministic, b.cudnn.benchmark = True, False
    b.cudnn.allow_tf32 = b.cuda.matmul.allow_tf32 = False
    return old


def _restore(old: tuple) -> None:
    import torch

    b = torch.backends
    b.cudnn.deterministic, b.cudnn.benchmark, b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32 = old


def prediction(model: str, gpu: str, batch: int, compiled: bool) -> dict | None:
    """The performance model's bf16 channels_last prediction for ``model`` on ``gpu``, at the
    same compile setting as the loop it stands beside; None when the model has none."""
    from finetune.estimate.perf.throughput import Setup, predict

    pred = predict(Setup(network=model, gpu_model=gpu, precision="bf16",
                         batch_per_device=batch, compile=compiled))  # fmt: skip
    if pred is None:
        return None
    return {"gpu": gpu, "compile": compiled, "images_per_s": pred.images_per_sec,
            "low": pred.low, "high": pred.high, "basis": list(pred.basis)}  # fmt: skip


def throughput(ctx: Context, model: str, compiled: bool) -> dict:
    """The network alone (benchmarks.reference_loop, a fresh process) checked against a plain
    torchvision loop (also fresh), with its anchors beside it: the performance model's
    prediction for this GPU, and MLPerf's H100 record for ResNet-50. On a GPU the step fails
    when the two loops differ by more than reference_loop.PLAIN_AGREEMENT."""
    from finetune.catalog import gpu_peaks

    a = ctx.a
    got = reference_loop.checked(model, ctx.classes, a.batch, a.image_size, a.precision,
                                 compiled, a.warmup, a.batches)  # fmt: skip
    peak = gpu_peaks.lookup(ctx.device_name)
    gpu = peak.model if peak else DRY_GPU
    # the prediction is for the real sizes (224 px, this batch on a GPU), whatever ran here
    batch = a.batch if ctx.gpu else 256
    pred = prediction(model, gpu, batch, compiled)
    row = {"model": model, "compile": compiled, **got, "batch": a.batch,
           "image_size": a.image_size, "precision": a.precision, "layout": "channels_last",
           "predicted": pred}  # fmt: skip
    if ctx.gpu and not got["agrees"]:
        row["within_tolerance"] = False  # the reference is measuring something else
    if pred is not None and ctx.gpu:
        row["measured_over_predicted"] = got["images_per_s"] / pred["images_per_s"]
    if model == "resnet50":
        row["mlperf_v4_0_h100"] = MLPERF_RESNET50_H100
        if ctx.gpu:
            row["measured_over_mlperf"] = got["images_per_s"] / 7156
    return row
