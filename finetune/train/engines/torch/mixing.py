"""Mixup and cutmix of a batch on the device, with soft targets (timm's Mixup; torchvision's
box rule): each image mixed with its neighbour by one lambda per batch, drawn from generators
seeded by the run's position (docs/trainer.md: mixup and cutmix)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

MIX_TAG = 0x6D6978  # keeps these draws apart from the crops' (seed, epoch, position)


@dataclass(frozen=True)
class Mixer:
    """Batch mixing as the hyperparameters say (see the module docstring)."""

    num_classes: int
    seed: int
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    prob: float = 1.0
    switch_prob: float = 0.5

    def draw(self, epoch: int, position: int) -> tuple[str, float, np.random.Generator]:
        """(kind: "none" | "mixup" | "cutmix", lam, the generator for cutmix's box)."""
        rng = np.random.default_rng([self.seed, epoch, position, MIX_TAG])
        if rng.random() >= self.prob:
            return "none", 1.0, rng
        cut = self.cutmix_alpha > 0 and (self.mixup_alpha <= 0 or rng.random() < self.switch_prob)
        alpha = self.cutmix_alpha if cut else self.mixup_alpha
        return ("cutmix" if cut else "mixup"), float(rng.beta(alpha, alpha)), rng

    def apply(self, x: torch.Tensor, y: torch.Tensor, epoch: int, position: int):
        """(mixed images, soft targets (B, classes) float32) of batch ``position``."""
        kind, lam, rng = self.draw(epoch, position)
        if kind == "mixup":
            x = mixup(x, lam)
        elif kind == "cutmix":
            x, lam = cutmix(x, lam, rng)
        return x, soft_targets(y, self.num_classes, lam)


def mixup(x: torch.Tensor, lam: float) -> torch.Tensor:
    """Every image blended with its neighbour: ``lam * x + (1 - lam) * x.roll(1, 0)``."""
    return x * lam + x.roll(1, 0) * (1.0 - lam)


def cut_box(height: int, width: int, lam: float, rng: np.random.Generator):
    """(x0, y0, x1, y1): a box of sides ``sqrt(1 - lam)`` x the image's, centred at a
    uniform pixel, clipped at the edges (torchvision's RandomCutmix)."""
    cx, cy = int(rng.integers(width)), int(rng.integers(height))
    r = 0.5 * math.sqrt(1.0 - lam)
    half_w, half_h = int(r * width), int(r * height)
    x0, y0 = max(cx - half_w, 0), max(cy - half_h, 0)
    x1, y1 = min(cx + half_w, width), min(cy + half_h, height)
    return x0, y0, x1, y1


def cutmix(x: torch.Tensor, lam: float, rng: np.random.Generator):
    """(images with the neighbour's box pasted in, lam = 1 - box area / image area)."""
    h, w = x.shape[-2:]
    x0, y0, x1, y1 = cut_box(h, w, lam, rng)
    out = x.clone()
    out[..., y0:y1, x0:x1] = x.roll(1, 0)[..., y0:y1, x0:x1]
    return out, 1.0 - (x1 - x0) * (y1 - y0) / (w * h)


def soft_targets(y: torch.Tensor, num_classes: int, lam: float) -> torch.Tensor:
    """``lam * onehot(y) + (1 - lam) * onehot(y.roll(1))``, float32."""
    one = torch.nn.functional.one_hot(y, num_classes).to(torch.float32)
    return one * lam + one.roll(1, 0) * (1.0 - lam)


def from_hparams(hp) -> Mixer | None:
    """The run's mixer (None when both alphas are 0 or nothing is ever mixed)."""
    if (hp.mixup_alpha <= 0 and hp.cutmix_alpha <= 0) or hp.mix_prob <= 0:
        return None
    return Mixer(hp.num_classes, hp.seed, hp.mixup_alpha, hp.cutmix_alpha, hp.mix_prob,
                 hp.mix_switch_prob)  # fmt: skip
