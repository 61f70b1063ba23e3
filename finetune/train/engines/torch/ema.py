"""An exponential moving average of the weights: timm's ModelEmaV3 (parameters and buffers,
integer buffers copied), ``average = decay * average + (1 - decay) * weights`` after every
optimizer step, except during the first ``warmup`` steps, when the average is the weights
themselves (timm's ``update_after_step``). The copy lives on the device in eval mode; it is
checkpointed beside the weights (EMA_FILE) with its update count and resumed exactly."""

from __future__ import annotations

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
        from timm.utils.model_ema import ModelEmaV3  # timm's import: seconds, only with ema

        # timm copies while step - update_after_step - 1 <= 0: steps 1..warmup here
        self.timm = ModelEmaV3(net, decay=decay, update_after_step=warmup - 1)
        self.module = self.timm.module
        self.module.requires_grad_(False)
        self.updates = 0

    def update(self, net: nn.Module) -> None:
        """One step of the average towards ``net``'s current weights."""
        self.updates += 1
        self.timm.update(net, step=self.updates)

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
