"""One command for one GPU: does finetune's PyTorch engine work, and how fast, on this GPU?

    bash scripts/gpu-check.sh                      # = python -m benchmarks.gpu_check
    python -m benchmarks.gpu_check --out check.json
    python -m benchmarks.gpu_check --cpu-dry       # the same steps on a CPU, toy sizes

Needs one NVIDIA GPU, a CUDA build of torch + torchvision and this repository's requirements
(pydantic, pydantic-settings, platformdirs); nothing from the network (weights are not
downloaded, the dataset is generated). Steps, each timed and recorded in one JSON:

1. environment: versions, the GPU, its dense peaks from finetune's catalog;
2. dataset: a generated Caltech-256-sized set (257 classes, 15,420 training and 2,570
   validation images, shorter side 256), drawn by one process per class on every core and
   prepared by finetune into RecordIO on every core (180 s serially on the first run;
   expected under 30 s on 16 cores);
3. engine: a whole finetune.train job (ResNet-50, bf16, batch 256, one epoch) through the
   GPU-resident and the streaming data paths, torch.compile off and on -- it trains, writes
   its model, and reports its telemetry;
4. telemetry: over the timed steps only -- NVML utilisation, host input wait and input work
   in series, % of the dense peak, warm-up (compile) and validation seconds -- from those jobs;
5. decode: nvjpeg (the resident path) against Pillow (the streaming path): 4:4:4
   re-encodings within the IDCT bound, the 4:2:0 set within the chroma-upsampling bound
   (gpu_check_steps.DECODE_*, each with its reason);
6. ddp: one-process DistributedDataParallel over NCCL, deterministic, within DDP_MAX_ABS_DIFF;
7. throughput: ResNet-50 (compile off and on) and ResNet-152 (off) images/s, the network
   alone in a fresh process checked against a plain torchvision loop in another
   (benchmarks.reference_loop: bf16, channels_last, batch 256, within 3 %), beside the
   performance model's prediction for this GPU (finetune.estimate.perf) and, for ResNet-50,
   MLPerf Training v4.0's H100 record (~7,156 img/s per GPU, MXNet + DALI).

Expected wall clock on one H100/H200 (estimated from the first run, not measured): ~5 min --
dataset < 30 s, the four jobs ~75 s (the compiled one ~40 s of it), the six fresh-process
loops ~3 min (two compile); --budget-s (450) skips a costly step that would end past it.
``python -m finetune.estimate.perf.measured JSON`` then turns the report into measured rows.
``--cpu-dry`` runs every step on the CPU at toy sizes (32 px, ResNet-18, a few batches, fp32
where the engine trains a CPU in fp32) and names each skip: what needs CUDA (nvjpeg, NCCL, NVML, the
GPU's peak), and torch.compile (minutes of inductor on a small CPU; ``--dry-compile`` runs it).
Exit status: 0 when no step failed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import gpu_check_steps as steps  # noqa: E402


def sizes(gpu: bool, a: argparse.Namespace) -> argparse.Namespace:
    """The check's sizes: the real ones on a GPU, toy ones for --cpu-dry."""
    if gpu:
        a.image_size, a.side, a.batch, a.warmup, a.batches = 224, 256, 256, 5, 30
        a.train, a.val, a.classes, a.model, a.decode_n = 15_420, 2_570, 257, "resnet50", 256
        a.precision, a.workers, a.compiles = "bf16", -1, (False, True)
        a.engine_batches = 0  # the engine trains whole epochs (60 batches of 256)
    else:
        a.image_size, a.side, a.batch, a.warmup, a.batches = 32, 40, 4, 1, 1
        a.train, a.val, a.classes, a.model, a.decode_n = 16, 8, 4, "resnet18", 8
        a.precision, a.workers = "bf16", 1
        a.compiles = (False, True) if a.dry_compile else (False,)
        a.engine_batches = 1
    a.epochs = 1
    return a


# seconds each step is expected to take on one H100/H200 (the 2026-11-26 run, with this
# issue's changes estimated): a step that would end past --budget-s is skipped and named
EXPECTED_S = {"engine compile=on": 60, "throughput compile=on": 110, "throughput": 35}


def run(a: argparse.Namespace, save=None) -> dict:
    """Every step, in order; a step that fails is recorded and the next one still runs.
    ``save(report)`` is called after every step (a run cut short leaves what it measured)."""
    import torch

    from finetune.train import startup

    gpu = torch.cuda.is_available() and not a.cpu_dry
    if not gpu and not a.cpu_dry:
        raise SystemExit("no CUDA device: run on a GPU machine, or pass --cpu-dry to try the steps")
    a = sizes(gpu, a)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report = {"check": "finetune gpu-check", "mode": "gpu" if gpu else "cpu-dry",
              "host": platform.node(), "started": now,
              "sizes": {k: getattr(a, k) for k in ("image_size", "batch", "train", "val",
                        "classes", "model", "precision")},
              "steps": {}, "skipped": []}  # fmt: skip
    started = time.perf_counter()
    report["budget_s"] = a.budget_s
    save = save or (lambda _report: None)

    def step(name: str, fn, expected: float = 0.0) -> None:
        spent = time.perf_counter() - started
        if gpu and spent + expected > a.budget_s:
            _skip(report, name, f"time: {spent:.0f} s spent, ~{expected:.0f} s more would pass "
                  f"the {a.budget_s:.0f} s budget (--budget-s)")  # fmt: skip
        else:
            _step(report, name, fn)
        save(report)

    with tempfile.TemporaryDirectory(prefix="finetune-gpu-check-") as tmp:
        name = torch.cuda.get_device_name(0) if gpu else None
        ctx = steps.Context(a=a, gpu=gpu, work=Path(tmp), classes=a.classes, device_name=name)
        step("environment", lambda: steps.environment(ctx))
        startup.setup_done()  # torch and torchvision imported: the collector on (main)
        step("dataset", lambda: steps.dataset(ctx))
        engine = [(p, c) for c in a.compiles for p in ("resident", "stream")]
        for path, compiled in engine:
            label = f"engine {path} compile={'on' if compiled else 'off'}"
            cost = EXPECTED_S["engine compile=on"] if compiled else 0
            step(label, lambda p=path, c=compiled: steps.engine_run(ctx, p, c), cost)
        if not gpu and not a.dry_compile:
            _skip(report, "engine compile=on", "time, not CUDA: inductor compiles a ResNet "
                  "for minutes on a small CPU (--dry-compile runs it)")  # fmt: skip
        _telemetry(report, gpu)
        step("decode", lambda: steps.decode(ctx))
        if not gpu:
            _skip(report, "decode nvjpeg", "needs CUDA: compared torchvision's CPU decoder "
                  "(the resident path on a CPU) with Pillow instead")  # fmt: skip
        step("ddp", lambda: steps.ddp(ctx))
        if not gpu:
            _skip(report, "ddp nccl", "needs CUDA: the same one-process DDP ran over gloo")
        # ResNet-152 uncompiled only: its compile would cost a minute or two of the 8
        models = (
            {"resnet50": a.compiles, "resnet152": (False,)} if gpu else {"resnet50": a.compiles}
        )
        for model, compiles in models.items():
            for compiled in compiles:
                label = f"throughput {model} compile={'on' if compiled else 'off'}"
                cost = EXPECTED_S["throughput compile=on" if compiled else "throughput"]
                step(label, lambda m=model, c=compiled: steps.throughput(ctx, m, c), cost)
        if not gpu:
            _skip(report, "throughput resnet152", "a toy CPU figure says nothing; ResNet-50's "
                  "row already exercises the step")  # fmt: skip
    report["wall_s"] = time.perf_counter() - started
    report["ok"] = all(s["status"] != "failed" for s in report["steps"].values())
    report["complete"] = True  # (a report saved midway has no such key)
    return report


def _step(report: dict, name: str, fn) -> None:
    started = time.perf_counter()
    try:
        row = {"status": "ok", **fn()}
    except steps.Skip as why:
        row = {"status": "skipped"}
        _skip(report, name, str(why))
    except Exception as exc:  # the check goes on; the JSON says what broke and where
        tb = traceback.format_exception(exc)
        row = {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "trace": tb[-3:]}
    if row.get("within_tolerance") is False or row.get("grads_match") is False:
        row["status"] = "failed"
    row["seconds"] = time.perf_counter() - started
    report["steps"][name] = row
    print(_line(name, row), flush=True)


def _skip(report: dict, what: str, why: str) -> None:
    report["skipped"].append({"what": what, "why": why})
    print(f"  skipped  {what}: {why}", flush=True)


def _telemetry(report: dict, gpu: bool) -> None:
    """NVML utilisation, input wait and % of peak, as the engine's jobs reported them."""
    jobs = {
        k: v for k, v in report["steps"].items() if k.startswith("engine ") and v["status"] == "ok"
    }
    fields = ("input_wait_fraction", "input_device_fraction", "pct_of_peak", "gpu_util_pct",
              "gpu_mem_gib", "warmup_seconds", "validation_seconds")  # fmt: skip
    row = {
        k: {job: v.get(f) for job, v in jobs.items()} for k, f in zip(fields, fields, strict=True)
    }
    row["status"] = (
        "ok"
        if jobs and all(v is not None for v in row["input_wait_fraction"].values())
        else "failed"
    )
    report["steps"]["telemetry"] = row
    print(_line("telemetry", row), flush=True)
    if not gpu:
        _skip(report, "telemetry NVML and % of peak", "needs an NVIDIA GPU (NVML, a known peak)")


def _line(name: str, row: dict) -> str:
    shown = {k: v for k, v in row.items()
             if k in ("images_per_s", "samples_per_sec", "mean_abs_diff", "backend",
                      "precision_used", "val_acc", "error")}  # fmt: skip
    text = ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()
    )
    pred = row.get("predicted")
    if pred:
        text += f", model predicts {pred['images_per_s']:.0f} img/s on {pred['gpu']}"
    if "mlperf_v4_0_h100" in row:
        text += ", MLPerf v4.0 H100: 7,156 img/s per GPU"
    return f"  {row['status']:8} {name}: {text}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu-dry", action="store_true", help="the same steps on a CPU, toy sizes")
    p.add_argument("--dry-compile", action="store_true", help="with --cpu-dry: compile too")
    p.add_argument("--out", type=Path, default=None,
                   help="the JSON (default $OUT/gpu-check.json where OUT is set, else "
                   "gpu-check-TIME.json)")  # fmt: skip
    p.add_argument("--budget-s", type=float, default=450.0,
                   help="skip a costly step that would end past this many seconds (default "
                   "450: 7.5 of a lent machine's 8 minutes)")  # fmt: skip
    a = p.parse_args(argv)
    import logging
    import os

    from finetune.train import startup

    # start-up as in the trainer's own entry (finetune.train.startup): no collections while
    # torch and torchvision import, then that garbage freed, the rest frozen (never walked
    # again, not even at exit) and the collector on before the steps that do the work
    # (run(), after "environment"); ~1.5 CPU-s less (import torch, torchvision,
    # torch._dynamo: 5.4-5.8 -> 3.5-4.4 user CPU-s, 2-core EPYC)
    startup.defer()

    logging.basicConfig(level=logging.WARNING)
    default = Path(os.environ["OUT"]) / "gpu-check.json" if os.environ.get("OUT") else None
    out = a.out or default or Path(f"gpu-check-{time.strftime('%Y%m%d-%H%M%S')}.json")

    def save(report: dict) -> None:
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(report, indent=1, default=str) + "\n")
        tmp.replace(out)  # a reader never sees half a report

    report = run(a, save)
    save(report)
    print(
        f"{'ok' if report['ok'] else 'FAILED'}: {out} ({report['wall_s']:.0f} s, {report['mode']})"
    )
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
