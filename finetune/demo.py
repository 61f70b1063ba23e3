"""`finetune demo`: the product end to end on this machine, offline, in a few minutes.

1. generate two small learnable Caltech-style image sets: a *source* task and a *target*
   task with other classes;
2. prepare both into RecordIO;
3. pre-train ResNet-18 on the source task (random init) -- the stand-in for ImageNet weights,
   which cannot be downloaded offline;
4. fine-tune on the target task starting from those weights: the weights are loaded and the
   classifier head is replaced for the target's classes, exactly as with real ImageNet weights;
5. train the same network on the target task from random weights, same data, seed and
   schedule, and show both side by side: transfer must beat scratch by TRANSFER_MARGIN at the
   first epoch and at the last;
6. report the runs (throughput, accuracy, cost: zero on your own machine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from finetune.data.datasets import prepare_folder
from finetune.data.prepare import PrepareResult, Progress
from finetune.data.synth import SynthSpec, generate

RECIPE = "smoke-resnet18"
TRANSFER_MARGIN = 0.10  # validation accuracy, fine-tuned minus scratch, first and last epoch


@dataclass(frozen=True)
class DemoSpec:
    workdir: Path
    classes: int = 6
    per_class: int = 60
    image_side: int = 64  # generated images: shorter side between this and 1.5x this
    resize: int = 40
    epochs: int = 8
    seed: int = 0


def images_step(spec: DemoSpec, task: str) -> Path:
    """Generate one task's image set once (kept between demo runs). The source task has
    more classes and another seed, so its classes differ from the target's."""
    root = spec.workdir / "images" / task
    if not (root / ".complete").exists():
        source = task == "source"
        generate(
            root,
            SynthSpec(
                classes=spec.classes + 2 if source else spec.classes,
                per_class=spec.per_class,
                min_side=spec.image_side,
                max_side=int(spec.image_side * 1.5),
                seed=spec.seed + (1 if source else 0),
                quirks=not source,
            ),
        )
        (root / ".complete").touch()
    return root


def prepare_step(spec: DemoSpec, task: str, progress: Progress | None = None) -> PrepareResult:
    params = dict(val_ratio=0.25, resize=spec.resize, quality=90, seed=spec.seed)
    images = images_step(spec, task)
    return prepare_folder(images, spec.workdir / "datasets" / task, task, params, progress=progress)


def train_step(dataset: Path, overrides: list[str], on_epoch: Callable | None = None):
    """One local run of the smoke recipe, followed to the end; returns the ledger's Run."""
    from finetune import service
    from finetune.runs.ledger import open_default

    request = service.LaunchRequest(recipe=RECIPE, dataset=str(dataset), overrides=overrides)
    seen = {"n": 0}

    def update(run, status, epochs, text):
        for e in epochs[seen["n"] :]:
            if on_epoch:
                on_epoch(e)
        seen["n"] = max(seen["n"], len(epochs))

    with open_default() as ledger:
        run, backend = service.start(request, ledger)
        return service.follow(run, backend, ledger, update)


# The smoke recipe's own settings are for seconds-long test runs; the demo trains a little
# longer, with a batch and schedule that learn this small set in about a minute.
_TRAINING = ["batch_per_gpu=16", "lr_per_gpu=0.02", "kind=cosine", "steps=[]"]


def pretrain_overrides(spec: DemoSpec) -> list[str]:
    return [f"epochs={spec.epochs}", *_TRAINING, "pretrained=false"]


def finetune_overrides(spec: DemoSpec, weights: Path) -> list[str]:
    return [f"epochs={spec.epochs}", *_TRAINING, "pretrained=true", f"weights={weights}"]


def scratch_overrides(spec: DemoSpec) -> list[str]:
    """The fine-tuning run's settings, from random weights: the transfer baseline."""
    return [f"epochs={spec.epochs}", *_TRAINING, "pretrained=false"]


@dataclass(frozen=True)
class Transfer:
    """Fine-tuned vs from-scratch validation accuracy, epoch by epoch."""

    fine: list[float]
    scratch: list[float]
    margin: float = TRANSFER_MARGIN

    @property
    def gains(self) -> list[float]:
        return [f - s for f, s in zip(self.fine, self.scratch, strict=True)]

    @property
    def holds(self) -> bool:
        """Transfer beats scratch by the margin at the first epoch and at the last."""
        g = self.gains
        return bool(g) and g[0] >= self.margin and g[-1] >= self.margin

    def lines(self) -> list[str]:
        rows = ["  epoch  fine-tuned  from scratch   gain"]
        for i, (f, s, g) in enumerate(zip(self.fine, self.scratch, self.gains, strict=True)):
            rows.append(f"  {i + 1:>5}  {f:>10.3f}  {s:>12.3f}  {g:+.3f}")
        verdict = "holds" if self.holds else "DOES NOT HOLD"
        rows.append(
            f"  transfer {verdict}: fine-tuning must beat scratch by at least "
            f"{self.margin:.2f} at the first and the last epoch"
        )
        return rows


def transfer(fine_epochs, scratch_epochs) -> Transfer:
    """The comparison from two runs' epoch metrics."""
    fine = [e.val_acc or 0.0 for e in fine_epochs]
    scratch = [e.val_acc or 0.0 for e in scratch_epochs]
    n = min(len(fine), len(scratch))
    return Transfer(fine[:n], scratch[:n])


def weights_of(run) -> Path:
    """The Gluon parameter file a finished run left in its model directory."""
    return Path(run.run_dir) / "ml" / "model" / "gluon.params"
