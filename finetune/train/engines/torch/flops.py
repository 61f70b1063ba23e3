"""The network's own FLOP count: one forward + backward, counted by
torch.utils.flop_counter.FlopCounterMode with the network's parameters and buffers replaced
by meta-device stand-ins (shapes only: no arithmetic, and the real weights, gradients and
BatchNorm statistics stay untouched). Counted once per run; what a frozen backbone skips
(its weight gradients) is not counted."""

from __future__ import annotations

import logging

import torch
from torch import nn

log = logging.getLogger(__name__)


def per_image(net: nn.Module, image_size: int, batch: int = 2) -> float | None:
    """Training FLOPs per image (multiply-adds count 2), or None if counting fails."""
    from torch.func import functional_call
    from torch.utils.flop_counter import FlopCounterMode

    try:
        stand_ins = {
            name: torch.empty_like(t, device="meta").requires_grad_(t.requires_grad)
            for name, t in [*net.named_parameters(), *net.named_buffers()]
        }
        x = torch.empty(batch, 3, image_size, image_size, device="meta")
        x = x.contiguous(memory_format=torch.channels_last)
        counter = FlopCounterMode(display=False)
        with counter:
            out = functional_call(net, stand_ins, (x,))
            if out.requires_grad:
                out.float().sum().backward()
        return counter.get_total_flops() / batch
    except Exception as exc:  # telemetry must never stop a run
        log.warning("FLOP count failed (%s: %s): no achieved TFLOP/s", type(exc).__name__, exc)
        return None
