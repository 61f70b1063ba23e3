"""Generated images whose class is the *scale* of what they show, relative to the whole
image: disks of radius 5 %, 10 % or 20 % of the shorter side. A network that trains at one
scale and validates at another confuses the classes (a quarter-image training crop shows
the disks 1.7x larger than the resized validation image does), so these sets catch a data
path whose splits disagree on scale. Colours and positions are random: no colour or texture
cue."""

from __future__ import annotations

import random
from pathlib import Path

SIZES = {"small": 0.05, "medium": 0.10, "large": 0.20}


def generate_scales(root: Path, per_class: int, side: int, seed: int = 0) -> Path:
    """A folder per size class; JPEGs with shorter side ``side`` px (aspect up to 5:4)."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    for label, (name, frac) in enumerate(SIZES.items()):
        folder = root / f"{label:02d}.{name}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            long = side + rng.randint(0, side // 4)
            w, h = (long, side) if rng.random() < 0.5 else (side, long)
            img = Image.new("RGB", (w, h), tuple(rng.randint(0, 90) for _ in range(3)))
            draw = ImageDraw.Draw(img)
            r = frac * side * rng.uniform(0.9, 1.1)
            for _ in range(3):
                cx, cy = rng.uniform(r, w - r), rng.uniform(r, h - r)
                fill = tuple(rng.randint(140, 255) for _ in range(3))
                draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
            img.save(folder / f"{i:03d}.jpg", quality=92)
    return root


def generate_brightness(root: Path, per_class: int, side: int, seed: int = 0) -> Path:
    """Two classes a network separates within a few steps: dark and bright noise (JPEGs of
    ``side`` px, pixel values 0-90 or 165-255)."""
    from PIL import Image

    rng = random.Random(seed)
    for label, (name, low) in enumerate({"dark": 0, "bright": 165}.items()):
        folder = root / f"{label:02d}.{name}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            pixels = bytes(rng.randint(low, low + 90) for _ in range(side * side * 3))
            Image.frombytes("RGB", (side, side), pixels).save(folder / f"{i:03d}.jpg", quality=92)
    return root
