"""Precision and the optimizer, decided once per run: the autocast dtype, the gradient scaler
(enabled for fp16 only, so the step has one path) and SGD/Adam with fused kernels.

Every one of these runs on a CPU too (autocast "cpu", GradScaler("cpu"), fused SGD/Adam CPU
kernels): an explicit ``precision=bf16|fp16`` is honoured there -- slowly, with a warning --
so the GPU's code path runs in CI (bf16's backward pass there without oneDNN: :func:`backward`);
``auto`` trains fp32 on a CPU.
"""

from __future__ import annotations

import contextlib
import logging

import torch

log = logging.getLogger(__name__)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def choose(asked: str, device: torch.device) -> str:
    """``auto``: bf16 on GPUs that have it, else fp16 with a gradient scaler (T4, V100), fp32
    on a CPU; an explicit precision as asked (on a CPU with a warning: it is slow there)."""
    if device.type != "cuda":
        if asked in DTYPES:
            log.warning(
                "precision=%s on a CPU: autocast runs there but is several times slower than "
                "fp32 (use it to test the GPU code path; precision=auto trains fp32 on a CPU)",
                asked,
            )
            return asked
        return "fp32"
    if asked != "auto":
        return asked
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def autocast(precision: str, device: torch.device):
    """The forward pass's autocast context (none for fp32)."""
    if precision in DTYPES:
        return torch.autocast(device.type, dtype=DTYPES[precision])
    return contextlib.nullcontext()


# bf16 on a CPU: a stride-2 3x3 convolution (padding 1) of a 1x1 input, where only the centre
# tap meets a pixel. torch 2.14.1's oneDNN v3.12 (ONEDNN_VERBOSE: jit_bf16:avx512_core_bf16,
# backward_weights) leaves the centre row's side taps of the weight gradient unwritten: they
# hold whatever the memory held (NaN, 1e30, or 0 by luck). Measured on a 2-core AMD EPYC with
# AVX512-BF16, 2026-11-28: wrong in 90 of 144 shapes (batch 1-8, 3-256 in, 8-512 out, NCHW or
# channels_last); one shape repeated six times in a process was right by luck in 1-3 of them,
# so no quick check can say a process is safe. Right in all 144 with oneDNN off, in fp32 and
# fp16, and with oneDNN capped at AVX2 (ONEDNN_MAX_CPU_ISA). A ResNet meets it below 32 px
# (layer4's first convolution sees 1x1): test_precision's bf16 run, which had passed on this
# project's machines until then, saved weights of -2e31 on that one. Cost of oneDNN off,
# ResNet-18, batch 8: 0.095 -> 0.24 CPU-s a step at 16 px, 0.09 -> 0.36 at 32 px; bf16 on a
# CPU is there to test the GPU's code path (choose() warns it is slow), so right beats fast.
def backward(precision: str, device: torch.device):
    """The backward pass's context: ATen's own kernels in place of oneDNN's for bf16 on a CPU,
    whose convolution weight gradients can be garbage (above); else none."""
    if precision == "bf16" and device.type == "cpu":
        return _onednn_off()
    return contextlib.nullcontext()


@contextlib.contextmanager
def _onednn_off():
    # torch.backends.mkldnn.flags(enabled=False) would also reset the TF32 and determinism
    # flags (and warn, each step, that oneDNN's TF32 is for Intel GPUs): only this one changes
    was = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = was


def scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """fp16 needs loss scaling; for any other precision the scaler is a pass-through."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def optimizer(groups: list[dict], hp) -> torch.optim.Optimizer:
    """SGD (momentum, Nesterov for nag) or Adam, fused kernels where torch has them (CUDA,
    and CPU since torch 2.4). The rate starts at 0: the schedule sets every group's rate
    (times its ``lr_mult``) before each step."""
    kwargs: dict = {"lr": 0.0, "weight_decay": hp.wd, "fused": True}
    if hp.optimizer in ("sgd", "nag"):
        kwargs.update(momentum=hp.momentum, nesterov=hp.optimizer == "nag")
        make: type[torch.optim.Optimizer] = torch.optim.SGD
    else:
        make = torch.optim.Adam
    try:
        return make(groups, **kwargs)
    except (TypeError, RuntimeError):  # an older torch without the fused kernel
        kwargs.pop("fused")
        return make(groups, **kwargs)
