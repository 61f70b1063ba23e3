"""Crop boxes of the preprocessing contract, drawn with a seeded torch Generator.

Every random draw of an epoch comes from a generator seeded by (seed, epoch, step), so a run
resumed at any step draws exactly what the uninterrupted run drew (nothing to checkpoint).
Boxes are (x0, y0, x1, y1) pixel edges in the resized image.
"""

from __future__ import annotations

import math

import torch

from finetune.train.preprocess import Preprocessing


def generator(seed: int, *parts: int) -> torch.Generator:
    """A CPU generator for one (seed, epoch, step, ...) position of the run."""
    g = torch.Generator()
    value = seed
    for p in parts:
        value = (value * 1_000_003 + p + 1) % (2**63 - 1)
    g.manual_seed(value)
    return g


def center(widths: torch.Tensor, heights: torch.Tensor, size: int) -> torch.Tensor:
    """The validation box of every image: the centre square, offsets floored."""
    x0 = torch.div(widths - size, 2, rounding_mode="floor")
    y0 = torch.div(heights - size, 2, rounding_mode="floor")
    return torch.stack([x0, y0, x0 + size, y0 + size], 1).to(torch.float32)


def train(
    widths: torch.Tensor, heights: torch.Tensor, contract: Preprocessing, g: torch.Generator
) -> torch.Tensor:
    """Training boxes for images of these sizes (CPU tensors), as the contract says."""
    size = contract.image_size
    if contract.train_crop == "center":
        return center(widths, heights, size)
    if contract.train_crop == "random":
        x0 = (torch.rand(len(widths), generator=g) * (widths - size + 1)).floor()
        y0 = (torch.rand(len(heights), generator=g) * (heights - size + 1)).floor()
        return torch.stack([x0, y0, x0 + size, y0 + size], 1)
    return _resized(widths.to(torch.float64), heights.to(torch.float64), contract, g, size)


def _resized(w, h, contract: Preprocessing, g: torch.Generator, size: int) -> torch.Tensor:
    """Random-resized crops: area fraction and log-uniform aspect ratio, ten tries, else
    the centre square (as torchvision's RandomResizedCrop and the reference do)."""
    n, tries = len(w), 10
    lo, hi = contract.area
    area = (w * h)[:, None] * (lo + (hi - lo) * torch.rand(n, tries, generator=g, dtype=w.dtype))
    rlo, rhi = math.log(contract.ratio[0]), math.log(contract.ratio[1])
    aspect = torch.exp(rlo + (rhi - rlo) * torch.rand(n, tries, generator=g, dtype=w.dtype))
    bw = torch.round(torch.sqrt(area * aspect))
    bh = torch.round(torch.sqrt(area / aspect))
    ok = (bw > 0) & (bh > 0) & (bw <= w[:, None]) & (bh <= h[:, None])
    first = torch.where(ok.any(1), ok.to(torch.int64).argmax(1), torch.full((n,), -1))
    ux, uy = torch.rand(n, generator=g, dtype=w.dtype), torch.rand(n, generator=g, dtype=w.dtype)
    rows = torch.arange(n)
    pick = first.clamp(min=0)
    cw, ch = bw[rows, pick], bh[rows, pick]
    x0 = torch.floor(ux * (w - cw + 1))
    y0 = torch.floor(uy * (h - ch + 1))
    fallback = center(w.to(torch.int64), h.to(torch.int64), size).to(w.dtype)
    boxes = torch.stack([x0, y0, x0 + cw, y0 + ch], 1)
    return torch.where((first >= 0)[:, None], boxes, fallback).to(torch.float32)


def flips(n: int, contract: Preprocessing, g: torch.Generator) -> torch.Tensor:
    """Which images of a batch are mirrored (p = 0.5 when the contract flips)."""
    if not contract.flip:
        return torch.zeros(n, dtype=torch.bool)
    return torch.rand(n, generator=g) < 0.5
