"""Generated Caltech-style image folders: for the demo, the tests and the benchmarks.

Each class draws one kind of shape in its own colour on a textured background, so a small
network can learn the classes, while sizes and content vary like real photos (shorter side
between ``min_side`` and ``max_side``, aspect ratios 3:4 to 16:9, JPEG at quality 90).
``quirks=True`` adds what the real Caltech-256 archive contains: a non-image file in a class
folder (198.spider/RENAME2) and an empty nested folder (056.dog/greg/vision309).
"""

from __future__ import annotations

import colorsys
import random
from dataclasses import dataclass
from pathlib import Path

SHAPES = ("ellipse", "rectangle", "triangle", "cross", "ring", "bars")


@dataclass(frozen=True)
class SynthSpec:
    classes: int = 8
    per_class: int = 30
    min_side: int = 200
    max_side: int = 800
    seed: int = 0
    quirks: bool = False
    clutter: bool = False


def class_names(n: int, clutter: bool = False) -> list[str]:
    """Caltech-style folder names: '001.ellipse-0', '002.rectangle-1', ... and '257.clutter'
    (the real archive's clutter class keeps its number whatever the class count)."""
    names = [f"{i + 1:03d}.{SHAPES[i % len(SHAPES)]}-{i}" for i in range(n)]
    if clutter:
        names.append("257.clutter")
    return names


def _one_class(job) -> None:
    root, spec, label, name, n_classes = job
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{spec.seed}:{name}")
    for i in range(spec.per_class):
        short = rng.randint(spec.min_side, spec.max_side)
        long = int(short * rng.uniform(4 / 3, 16 / 9))
        w, h = (long, short) if rng.random() < 0.7 else (short, long)
        img = render(label, n_classes, rng, w, h)
        img.save(folder / f"{label + 1:03d}_{i + 1:04d}.jpg", quality=90)


def render(label: int, n_classes: int, rng: random.Random, width: int, height: int):
    """Draw one image of class ``label``: a PIL.Image in RGB."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    nrng = np.random.default_rng(rng.getrandbits(32))
    # Background: a smooth two-colour gradient plus low-amplitude noise, like a photo's
    # out-of-focus background; gives JPEG sizes close to real photos.
    c0 = nrng.integers(40, 215, 3)
    c1 = nrng.integers(40, 215, 3)
    t = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    bg = c0 * (1 - t) + c1 * t
    bg = np.broadcast_to(bg, (height, width, 3)).copy()
    bg += nrng.normal(0, 6, (height, width, 3)).astype(np.float32)
    img = Image.fromarray(np.clip(bg, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(2, 5)):  # distractors in grey tones
        x, y = rng.randrange(width), rng.randrange(height)
        r = rng.randint(min(width, height) // 20, min(width, height) // 8)
        g = rng.randint(60, 200)
        draw.rectangle([x - r, y - r, x + r, y + r], fill=(g, g, g))
    hue = label / max(n_classes, 1)
    rgb = tuple(int(255 * c) for c in colorsys.hsv_to_rgb(hue, 0.85, rng.uniform(0.75, 1.0)))
    size = rng.uniform(0.3, 0.6) * min(width, height)
    cx = rng.uniform(size / 2, width - size / 2)
    cy = rng.uniform(size / 2, height - size / 2)
    _draw_shape(draw, SHAPES[label % len(SHAPES)], cx, cy, size / 2, rgb)
    return img.filter(ImageFilter.SMOOTH) if rng.random() < 0.3 else img


def _draw_shape(draw, shape: str, cx: float, cy: float, r: float, rgb) -> None:
    box = [cx - r, cy - r, cx + r, cy + r]
    if shape == "ellipse":
        draw.ellipse(box, fill=rgb)
    elif shape == "rectangle":
        draw.rectangle(box, fill=rgb)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=rgb)
    elif shape == "cross":
        w = r / 3
        draw.rectangle([cx - w, cy - r, cx + w, cy + r], fill=rgb)
        draw.rectangle([cx - r, cy - w, cx + r, cy + w], fill=rgb)
    elif shape == "ring":
        draw.ellipse(box, outline=rgb, width=max(2, int(r / 3)))
    else:
        for k in range(4):
            x0 = cx - r + k * r / 2
            draw.rectangle([x0, cy - r, x0 + r / 4, cy + r], fill=rgb)


def generate(root: str | Path, spec: SynthSpec = SynthSpec(), workers: int = 1) -> list[str]:
    """Write a folder-per-class JPEG set under ``root``; returns the class folder names.
    ``workers`` processes draw classes in parallel (each class has its own seeded generator:
    the files are the same for any number)."""
    root = Path(root)
    names = class_names(spec.classes, spec.clutter)
    jobs = [(root, spec, label, name, len(names)) for label, name in enumerate(names)]
    if workers > 1 and len(jobs) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(workers, len(jobs))) as pool:
            list(pool.map(_one_class, jobs))
    else:
        for job in jobs:
            _one_class(job)
    if spec.quirks and names:
        (root / names[min(1, len(names) - 1)] / "RENAME2").write_text("not an image\n")
        (root / names[0] / "greg" / "vision309").mkdir(parents=True, exist_ok=True)
    return names
