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


# oneDNN's bf16 weight gradients of a strided conv of a 1x1 input can be garbage on AVX512-BF16
# CPUs, and no quick check tells a safe process: docs/decisions/005-bf16-cpu-onednn.md
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
