"""Generated Caltech-style image folders: for the demo, the tests and the benchmarks.

Each class draws one kind of shape in its own colour on a textured background, so a small
network can learn the classes, while sizes and content vary like real photos (shorter side
between ``min_side`` and ``max_side``, aspect ratios 3:4 to 16:9, JPEG at quality 90).
``shapes`` names the classes' shapes instead (any of FIGURES), each image's figure in a
random colour and tilt: the shape is then the only thing that tells a class, and two sets of
other shapes are two tasks with other classes that share what images are made of (edges,
corners, strokes, backgrounds), as ImageNet and Caltech-256 do.
``quirks=True`` adds what the real Caltech-256 archive contains: a non-image file in a class
folder (198.spider/RENAME2) and an empty nested folder (056.dog/greg/vision309).
"""

from __future__ import annotations

import colorsys
import math
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
    shapes: tuple[str, ...] = ()  # the classes' FIGURES, in random colours; () = SHAPES


def class_names(n: int, clutter: bool = False, shapes: tuple[str, ...] = ()) -> list[str]:
    """Caltech-style folder names: '001.ellipse-0', '002.rectangle-1', ... ('001.star', ...
    for ``shapes``) and '257.clutter' (the real archive's clutter class keeps its number
    whatever the class count)."""
    if shapes:
        names = [f"{i + 1:03d}.{shape}" for i, shape in enumerate(shapes)]
    else:
        names = [f"{i + 1:03d}.{SHAPES[i % len(SHAPES)]}-{i}" for i in range(n)]
    if clutter:
        names.append("257.clutter")
    return names


def _one_class(job) -> None:
    root, spec, label, name, n_classes = job
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{spec.seed}:{name}")
    figure = spec.shapes[label] if label < len(spec.shapes) else None  # (not the clutter)
    for i in range(spec.per_class):
        short = rng.randint(spec.min_side, spec.max_side)
        long = int(short * rng.uniform(4 / 3, 16 / 9))
        w, h = (long, short) if rng.random() < 0.7 else (short, long)
        img = render(label, n_classes, rng, w, h, figure)
        img.save(folder / f"{label + 1:03d}_{i + 1:04d}.jpg", quality=90)


def render(label: int, n_classes: int, rng: random.Random, width: int, height: int,
           figure: str | None = None):  # fmt: skip
    """Draw one image of class ``label``: a PIL.Image in RGB. With ``figure`` (a FIGURES
    name): that figure, large, in a random bright colour and tilt on a dark background."""
    from PIL import ImageDraw, ImageFilter

    img = _background(rng, width, height, FIGURE_BACKGROUND if figure else (40, 215))
    if figure:
        hue, value = rng.random(), rng.uniform(0.75, 1.0)
        rgb = tuple(int(255 * c) for c in colorsys.hsv_to_rgb(hue, 0.85, value))
        short = min(width, height)
        size = rng.uniform(*FIGURE_SIZE) * short
        # inside the centre square, as a photo centres its object: the validation crop's
        cx = width / 2 + rng.uniform(-1, 1) * (short - size) / 2
        cy = height / 2 + rng.uniform(-1, 1) * (short - size) / 2
        _draw_figure(img, figure, cx, cy, size / 2, rgb, rng.uniform(-TILT, TILT))
        return img.filter(ImageFilter.SMOOTH) if rng.random() < 0.3 else img
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


def _background(rng: random.Random, width: int, height: int, levels: tuple[int, int]):
    """A smooth two-colour gradient (channels between ``levels``) plus low-amplitude noise,
    like a photo's out-of-focus background; gives JPEG sizes close to real photos."""
    import numpy as np
    from PIL import Image

    nrng = np.random.default_rng(rng.getrandbits(32))
    c0 = nrng.integers(*levels, 3)
    c1 = nrng.integers(*levels, 3)
    t = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    bg = c0 * (1 - t) + c1 * t
    bg = np.broadcast_to(bg, (height, width, 3)).copy()
    bg += nrng.normal(0, 6, (height, width, 3)).astype(np.float32)
    return Image.fromarray(np.clip(bg, 0, 255).astype(np.uint8), "RGB")


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


# A figure: its width (a fraction of the image's shorter side), its tilt (degrees either way)
# and the background's channel levels (dark, so that any bright hue stands out)
FIGURE_SIZE = (0.6, 0.9)
TILT = 15.0
FIGURE_BACKGROUND = (20, 90)

# Figures on a unit square (-1..1, y down): polygons filled, then holes cut out. Kept apart at
# 32 px: none is another one tilted by less than TILT.
_BAR = 1 / 3


def _rect(x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, float]]:
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _regular(n: int, r: float = 1.0, turn: float = 0.0, inner: float = 0.0):
    points = []
    for k in range(n * (2 if inner else 1)):
        radius = inner if inner and k % 2 else r
        a = turn + 2 * math.pi * k / (n * (2 if inner else 1)) - math.pi / 2
        points.append((radius * math.cos(a), radius * math.sin(a)))
    return points


def _circle(cx: float, cy: float, r: float, n: int = 32):
    return [(cx + x * r, cy + y * r) for x, y in _regular(n)]


# name -> (filled polygons, holes)
FIGURES: dict[str, tuple[list, list]] = {
    "disc": ([_circle(0, 0, 1)], []),
    "square": ([_rect(-0.8, -0.8, 0.8, 0.8)], []),
    "triangle": ([[(0, -1), (-1, 0.8), (1, 0.8)]], []),
    "plus": ([_rect(-_BAR, -1, _BAR, 1), _rect(-1, -_BAR, 1, _BAR)], []),
    "ring": ([_circle(0, 0, 1)], [_circle(0, 0, 0.55)]),
    "stripes": ([_rect(-1 + k * 0.55, -1, -0.7 + k * 0.55, 1) for k in range(4)], []),
    "star": ([_regular(5, 1.0, inner=0.42)], []),
    "hexagon": ([_regular(6)], []),
    "frame": ([_rect(-0.9, -0.9, 0.9, 0.9)], [_rect(-0.45, -0.45, 0.45, 0.45)]),
    "cross": ([[(-1, -0.75), (-0.75, -1), (1, 0.75), (0.75, 1)],
               [(1, -0.75), (0.75, -1), (-1, 0.75), (-0.75, 1)]], []),
    "chevron": ([[(-1, -0.9), (-0.45, -0.9), (0.45, 0), (-0.45, 0.9), (-1, 0.9), (-0.1, 0)]], []),
    "semicircle": ([[(x, y) for x, y in _circle(0, 0.5, 1, 48) if y <= 0.5 + 1e-9]], []),
    "arrow": ([_rect(-1, -0.22, 0.1, 0.22), [(0.1, -0.75), (1, 0), (0.1, 0.75)]], []),
    "crescent": ([_circle(0, 0, 1)], [_circle(0.5, -0.2, 0.8)]),
    "tee": ([_rect(-1, -1, 1, -0.45), _rect(-0.28, -0.45, 0.28, 1)], []),
    "ell": ([_rect(-0.8, -1, -0.25, 1), _rect(-0.8, 0.45, 0.9, 1)], []),
    "hourglass": ([[(-0.85, -1), (0.85, -1), (0, 0)], [(0, 0), (0.85, 1), (-0.85, 1)]], []),
    "heart": ([_circle(-0.45, -0.35, 0.52), _circle(0.45, -0.35, 0.52),
               [(-0.95, -0.2), (0.95, -0.2), (0, 1)]], []),
    "dots": ([_circle(x, y, 0.38) for x in (-0.55, 0.55) for y in (-0.55, 0.55)], []),
    "diamond": ([[(0, -1), (0.65, 0), (0, 1), (-0.65, 0)]], []),
}  # fmt: skip


def _draw_figure(img, figure: str, cx: float, cy: float, r: float, rgb, tilt: float) -> None:
    """Paint FIGURES[figure] of radius ``r`` at (cx, cy), tilted by ``tilt`` degrees: drawn
    as a mask at 4x and scaled down, so its edges are smooth at any size."""
    from PIL import Image, ImageDraw

    filled, holes = FIGURES[figure]
    side = max(int(2 * r), 2)
    big = side * 4
    mask = Image.new("L", (big, big), 0)
    draw = ImageDraw.Draw(mask)

    def scaled(poly):
        return [((x + 1) / 2 * (big - 1), (y + 1) / 2 * (big - 1)) for x, y in poly]

    for poly in filled:
        draw.polygon(scaled(poly), fill=255)
    for poly in holes:
        draw.polygon(scaled(poly), fill=0)
    mask = mask.rotate(tilt, resample=Image.Resampling.BILINEAR)
    mask = mask.resize((side, side), Image.Resampling.BOX)
    img.paste(rgb, (int(cx - side / 2), int(cy - side / 2)), mask)


def generate(root: str | Path, spec: SynthSpec = SynthSpec(), workers: int = 1) -> list[str]:
    """Write a folder-per-class JPEG set under ``root``; returns the class folder names.
    ``workers`` processes draw classes in parallel (each class has its own seeded generator:
    the files are the same for any number)."""
    root = Path(root)
    names = class_names(spec.classes, spec.clutter, spec.shapes)
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
