"""`finetune demo`: the product end to end on this machine, offline, in a few minutes.

Generates a small learnable Caltech-style image set, prepares it into RecordIO, and (once
the engine is installed) fine-tunes and reports. Everything goes under one work folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from finetune.data.datasets import prepare_folder
from finetune.data.prepare import PrepareResult, Progress
from finetune.data.synth import SynthSpec, generate


@dataclass(frozen=True)
class DemoSpec:
    workdir: Path
    classes: int = 6
    per_class: int = 40
    image_side: int = 64  # generated images: shorter side between this and 1.5x this
    resize: int = 40
    seed: int = 0


@dataclass
class DemoResult:
    images: Path
    dataset: PrepareResult


def images_step(spec: DemoSpec) -> Path:
    """Generate the image set once (kept between demo runs)."""
    root = spec.workdir / "images" / "shapes"
    if not (root / ".complete").exists():
        generate(
            root,
            SynthSpec(
                classes=spec.classes,
                per_class=spec.per_class,
                min_side=spec.image_side,
                max_side=int(spec.image_side * 1.5),
                seed=spec.seed,
                quirks=True,
            ),
        )
        (root / ".complete").touch()
    return root


def prepare_step(spec: DemoSpec, images: Path, progress: Progress | None = None) -> PrepareResult:
    params = dict(val_ratio=0.25, resize=spec.resize, quality=90, seed=spec.seed)
    return prepare_folder(
        images, spec.workdir / "datasets" / "shapes", "shapes", params, progress=progress
    )
