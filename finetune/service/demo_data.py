"""The demo's two image sets (finetune.service.demo): a *source* task and a *target* task whose
classes are shapes, each image's shape in a random colour and tilt (finetune.data.synth), so
the shape is all that tells a class. No shape is in both: different classes, the same
low-level structure (edges, corners, strokes, backgrounds), as ImageNet and Caltech-256. The
source has more classes and more images per class; the target is split as Caltech-256's
protocol, a few images per class to train on and the rest to validate on.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from finetune import settings
from finetune.data.datasets import prepare_folder
from finetune.data.prepare import PrepareResult, Progress
from finetune.data.synth import SynthSpec, generate
from finetune.engines import backbones
from finetune.errors import DataError, UsageError

SOURCE_FIGURES = ("disc", "triangle", "plus", "ring", "star", "cross", "stripes", "chevron")
# the target's: the first ``classes`` of them
TARGET_FIGURES = ("arrow", "crescent", "tee", "ell", "hourglass", "heart",
                  "square", "hexagon", "frame", "semicircle", "dots", "diamond")  # fmt: skip
SOURCE_SCALE = 1.5  # source images per class, times the target's
SOURCE_VAL_RATIO = 0.25
DONE = ".complete"  # written last into a generated set: the generator's spec


@dataclass(frozen=True)
class DemoSpec:
    workdir: Path | None = None  # None: <data dir>/demo (``root``)
    # the engine a user runs on today's GPUs; `--engine mxnet` tells the same story on the
    # studies' engine
    engine: str = "torch"
    classes: int = 6  # of the target task (demo_data.TARGET_FIGURES)
    per_class: int = 80  # generated target images per class (the source: SOURCE_SCALE x)
    train_per_class: int = 30  # of them to train on, the rest to validate on
    image_side: int = 64  # generated images: shorter side between this and 1.5x this
    # the network's input: at 32 px ResNet-18's stride-4 stem leaves a shape a few cells
    # wide, and pre-training did not learn the shapes in the time the demo has
    image_size: int = 48
    epochs: int = 4  # docs/decisions/180-demo-sizes.md
    seed: int = 0

    @property
    def root(self) -> Path:
        """Where the demo keeps its images and datasets: ``workdir``, else <data dir>/demo."""
        if self.workdir is not None:
            return self.workdir
        return settings.get().data_dir / "demo"


def check_sizes(spec: DemoSpec) -> None:
    """Refuse a target task of more classes than it has shapes of its own."""
    if not 2 <= spec.classes <= len(TARGET_FIGURES):
        raise UsageError(
            f"--classes {spec.classes}: the demo's target task has {len(TARGET_FIGURES)} shapes "
            "of its own (none of the source task's)",
            f"give --classes between 2 and {len(TARGET_FIGURES)}.",
        )


def synth_spec(spec: DemoSpec, task: str) -> SynthSpec:
    """The generator's spec of ``task`` (source or target): its shapes, sizes and seed."""
    source = task == "source"
    shapes = SOURCE_FIGURES if source else TARGET_FIGURES[: spec.classes]
    return SynthSpec(
        classes=len(shapes),
        per_class=round(spec.per_class * SOURCE_SCALE) if source else spec.per_class,
        min_side=spec.image_side,
        max_side=int(spec.image_side * 1.5),
        seed=spec.seed * 2 + (1 if source else 0),
        quirks=not source,
        shapes=shapes,
    )


def split(spec: DemoSpec, task: str) -> dict:
    """How ``task`` is split: the source 3:1; the target ``train_per_class`` images per class
    to train on (at most half of them) and the rest to validate on."""
    if task == "source":
        return {"val_ratio": SOURCE_VAL_RATIO}
    return {"train_per_class": min(spec.train_per_class, spec.per_class // 2)}


def images_step(spec: DemoSpec, task: str) -> Path:
    """Generate one task's image set once (kept between demo runs of the same spec): drawn
    beside it, then put in place of the demo's earlier set, never of a folder not its own."""
    root = spec.root / "images" / task
    synth = repr(synth_spec(spec, task))
    if _made_by_demo(root) == synth:
        return root
    if root.exists() and _made_by_demo(root) is None:
        raise DataError(
            f"{root} exists and holds no images the demo generated, so it is not replaced",
            "give `finetune demo --dir` a new folder, or move that one away yourself.",
        )
    partial = root.with_name(f".{task}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    generate(partial, synth_spec(spec, task))
    (partial / DONE).write_text(synth, encoding="utf-8")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    return root


def _made_by_demo(root: Path) -> str | None:
    """The spec a finished generation wrote into ``root`` (None: none did)."""
    try:
        return (root / DONE).read_text(encoding="utf-8")
    except OSError:
        return None


def prepare_step(spec: DemoSpec, task: str, progress: Progress | None = None) -> PrepareResult:
    """One task generated and prepared into RecordIO under the demo's folder."""
    # stored at the network's own resize, so the trainer only crops
    resize = backbones.get("resnet18").resize_for(spec.image_size)
    params = {"resize": resize, "quality": 90, "seed": spec.seed, **split(spec, task)}
    images = images_step(spec, task)
    return prepare_folder(images, spec.root / "datasets" / task, task, params, progress=progress)
