"""An exponential moving average of the weights (timm's ModelEmaV2, torchvision's
ExponentialMovingAverage): a copy of the network whose parameters and floating-point buffers
follow the trained ones after every optimizer step,

    average = decay * average + (1 - decay) * weights,

except during the first ``warmup`` steps, when the average is the weights themselves (as
torchvision's reference resets its average during the learning-rate warmup). Integer buffers
(BatchNorm's batch count) are copied. The copy lives on the device in eval mode; it is
checkpointed beside the weights (EMA_FILE) and resumed exactly, so a resumed run averages
what the uninterrupted run averaged.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import torch
from torch import nn

from finetune.train.engines.torch import files

EMA_FILE = "ema.pt"  # in a checkpoint folder: the average's state_dict and update count

log = logging.getLogger(__name__)


class Ema:
    """The average of ``net``'s weights; ``module`` evaluates with it."""

    def __init__(self, net: nn.Module, decay: float, warmup: int = 0) -> None:
        self.module = copy.deepcopy(net).eval()
        self.module.requires_grad_(False)
        self.decay, self.warmup = decay, warmup
        self.updates = 0

    @torch.no_grad()
    def update(self, net: nn.Module) -> None:
        """One step of the average towards ``net``'s current weights."""
        self.updates += 1
        mine, theirs = _tensors(self.module), _tensors(net)
        floats = [(a, b) for a, b in zip(mine, theirs, strict=True) if a.is_floating_point()]
        rest = [(a, b) for a, b in zip(mine, theirs, strict=True) if not a.is_floating_point()]
        for a, b in rest:
            a.copy_(b)
        if not floats:
            return
        avg, now = [a for a, _ in floats], [b.detach() for _, b in floats]
        if self.updates <= self.warmup:
            torch._foreach_copy_(avg, now)
            return
        torch._foreach_mul_(avg, self.decay)
        torch._foreach_add_(avg, now, alpha=1.0 - self.decay)

    def save(self, folder: Path) -> None:
        """The average into ``folder``/EMA_FILE (a checkpoint folder)."""
        state = {"weights": self.module.state_dict(), "updates": self.updates}
        torch.save(state, Path(folder) / EMA_FILE)

    def load(self, path: Path) -> None:
        """The average saved by :meth:`save` (a checkpoint's EMA_FILE)."""
        state = files.load(path)
        self.module.load_state_dict(state["weights"])
        self.updates = int(state["updates"])

    def restart_from(self, net: nn.Module) -> None:
        """A checkpoint without an average (written with ema off): start it from the
        checkpoint's weights, as a fresh run would from its initial ones."""
        self.module.load_state_dict(net.state_dict())
        self.updates = 0
        log.warning("the checkpoint has no %s: the weight average starts again from its "
                    "weights", EMA_FILE)  # fmt: skip


def from_hparams(net: nn.Module, hp) -> Ema | None:
    """The run's average (None when ``ema_decay`` is 0)."""
    if hp.ema_decay <= 0:
        return None
    return Ema(net, hp.ema_decay, hp.ema_warmup_steps)


def _tensors(net: nn.Module) -> list[torch.Tensor]:
    """Parameters then buffers, in the network's own order."""
    return [*net.parameters(), *net.buffers()]
