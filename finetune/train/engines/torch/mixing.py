"""Mixup and cutmix of a batch on the device with soft targets: timm's Mixup ("batch" mode:
one lambda per batch, each image mixed with its mirror in the batch), its draws taken from
numpy's generator seeded by the run's position (docs/trainer.md: mixup and cutmix)."""

from __future__ import annotations

import numpy as np
import torch

MIX_TAG = 0x6D6978  # keeps these draws apart from the crops' (seed, epoch, position)


class Mixer:
    """Batch mixing as the hyperparameters say, through timm's Mixup. timm draws from numpy's
    global generator: :meth:`apply` seeds it by (seed, epoch, position) for the one call and
    puts it back, so a resumed run mixes what the uninterrupted run mixed -- the part timm
    has no equivalent of."""

    def __init__(self, num_classes: int, seed: int, mixup_alpha: float = 0.0,
                 cutmix_alpha: float = 0.0, prob: float = 1.0,
                 switch_prob: float = 0.5) -> None:  # fmt: skip
        from timm.data.mixup import Mixup  # timm's import: a few seconds, only when mixing

        self.seed = seed
        # label smoothing stays the loss's (criterion.py), for mixed and plain batches alike
        self.timm = Mixup(mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha, prob=prob,
                          switch_prob=switch_prob, mode="batch", correct_lam=True,
                          label_smoothing=0.0, num_classes=num_classes)  # fmt: skip

    def apply(self, x: torch.Tensor, y: torch.Tensor, epoch: int, position: int):
        """(mixed images, soft targets (B, classes) float32) of batch ``position``; the
        images are mixed in place (timm's way: the batch is this step's own tensor)."""
        from timm.data.mixup import mixup_target  # (timm's import: see __init__)

        saved = np.random.get_state()
        np.random.seed([self.seed, epoch, position, MIX_TAG])
        try:  # (an odd batch too: timm's "batch" mode mixes the middle image with itself)
            lam = self.timm._mix_batch(x)
        finally:
            np.random.set_state(saved)
        target = mixup_target(y, self.timm.num_classes, lam, 0.0)
        return x, target.to(torch.float32)


def from_hparams(hp) -> Mixer | None:
    """The run's mixer (None when both alphas are 0 or nothing is ever mixed)."""
    if (hp.mixup_alpha <= 0 and hp.cutmix_alpha <= 0) or hp.mix_prob <= 0:
        return None
    return Mixer(hp.num_classes, hp.seed, hp.mixup_alpha, hp.cutmix_alpha, hp.mix_prob,
                 hp.mix_switch_prob)  # fmt: skip
