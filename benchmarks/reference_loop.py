"""The network alone, measured right: the reference every GPU benchmark divides by, and the plain
torchvision loop that checks it, each in a fresh Python process.

    python -m benchmarks.reference_loop --model resnet50 --compile on --batch 256
    python -m benchmarks.reference_loop --tiny            # any machine, seconds

Why a fresh process: Dynamo keeps "automatic dynamic" shapes per code object, so an engine job
that validated a short last batch through a compiled ResNet leaves every later compile of a
torchvision ResNet in that process with a symbolic batch (gpu-check 2026-11-26: the reference
compiled 45 s and ran at 0.73x a plain compile). Here each side also calls
``torch._dynamo.reset()`` and compiles with ``dynamic=False``.

Why no sync per step: a sync drains the queue every step (1 % eager, more compiled). The
reference times N steps between two CUDA events (on a CPU: the wall clock, one sync at the
end). The plain loop is the loop the first GPU run timed by hand (bare.json): ResNet of 257
classes, SGD momentum 0.9 and weight decay 1e-4, bf16 autocast, channels_last, cudnn.benchmark,
no finetune code; it is timed between two synchronisations. ``ratio`` = reference / plain, and
``agrees`` says whether they are within PLAIN_AGREEMENT.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Two loops running the same kernels on one GPU in the same minute differ by run-to-run noise
# (~1 % on the H200's eager rows: 4,682 vs 4,726 with a sync per step); 3 % is the issue's bound
# and three times that noise, so a reference outside it is measuring something else
PLAIN_AGREEMENT = 0.03


def _setup(model: str, classes: int, batch: int, size: int, compiled: bool):
    import torch
    from torchvision import models

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch._dynamo.reset()  # no shapes remembered from an earlier compile in this process
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True  # static shapes: pick the fastest conv once
    torch.manual_seed(0)
    net = models.get_model(model, num_classes=classes).to(dev, memory_format=torch.channels_last)
    x = torch.randn(batch, 3, size, size, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.arange(batch, device=dev) % classes
    fwd = torch.compile(net, dynamic=False) if compiled else net
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return torch, dev, net, fwd, opt, x, y


def measure(side: str, model: str, classes: int, batch: int, size: int, precision: str,
            compiled: bool, warmup: int, steps: int) -> dict:  # fmt: skip
    """images/s of ``side`` ("reference" or "plain") after ``warmup`` steps; the first step's
    extra seconds (the compile) as ``compile_s``."""
    torch, dev, _net, fwd, opt, x, y = _setup(model, classes, batch, size, compiled)
    from finetune.train import startup

    startup.setup_done()  # (a fresh process, deferred in __main__) the collector on, as before
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32

    def step() -> None:
        with torch.autocast(dev.type, dtype=dtype, enabled=precision == "bf16"):
            loss = torch.nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    started = time.perf_counter()
    step()
    sync()
    first = time.perf_counter() - started
    for _ in range(warmup):
        step()
    sync()
    if side == "reference" and dev.type == "cuda":
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(steps):
            step()
        end.record()
        end.synchronize()
        seconds = begin.elapsed_time(end) / 1000
    else:  # the plain loop as timed by hand; a CPU runs in order, so one sync suffices
        started = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        seconds = time.perf_counter() - started
    rate = steps * batch / seconds
    return {"side": side, "images_per_s": rate,
            "compile_s": first - seconds / steps if compiled else None}  # fmt: skip


def fresh(side: str, model: str, classes: int, batch: int, size: int, precision: str,
          compiled: bool, warmup: int, steps: int, timeout: float = 600) -> dict:  # fmt: skip
    """:func:`measure` in a new Python process (nothing compiled before it)."""
    args = [sys.executable, "-m", "benchmarks.reference_loop", "--side", side, "--model", model,
            "--classes", str(classes), "--batch", str(batch), "--image-size", str(size),
            "--precision", precision, "--compile", "on" if compiled else "off",
            "--warmup", str(warmup), "--steps", str(steps)]  # fmt: skip
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{side} loop failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def checked(model: str, classes: int, batch: int, size: int, precision: str, compiled: bool,
            warmup: int, steps: int) -> dict:  # fmt: skip
    """The reference and the plain loop, each fresh: the reference's row with the plain rate,
    ``ratio`` = reference / plain and ``agrees`` (within PLAIN_AGREEMENT)."""
    common = (model, classes, batch, size, precision, compiled, warmup, steps)
    ref = fresh("reference", *common)
    plain = fresh("plain", model, 257, *common[2:])
    ratio = ref["images_per_s"] / plain["images_per_s"]
    return {"images_per_s": ref["images_per_s"], "compile_s": ref["compile_s"],
            "plain_images_per_s": plain["images_per_s"], "plain_compile_s": plain["compile_s"],
            "ratio_to_plain": ratio, "agrees": abs(ratio - 1) <= PLAIN_AGREEMENT,
            "agreement": PLAIN_AGREEMENT, "fresh_process": True}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", choices=("reference", "plain", "both"), default="both")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--classes", type=int, default=257)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--compile", choices=("on", "off"), default="off")
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--tiny", action="store_true", help="resnet18, 32 px, batch 4, fp32")
    a = p.parse_args(argv)
    if a.tiny:
        a.model, a.image_size, a.batch, a.precision, a.warmup, a.steps = (
            "resnet18", 32, 4, "fp32", 1, 3)  # fmt: skip
    common = (a.model, a.classes, a.batch, a.image_size, a.precision, a.compile == "on",
              a.warmup, a.steps)  # fmt: skip
    row = checked(*common) if a.side == "both" else measure(a.side, *common)
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    # start-up as the trainer's and gpu_check's (finetune.train.startup; measured there):
    # both loops start this way, so their ratio compares the same thing
    from finetune.train import startup

    startup.defer()
    main()
