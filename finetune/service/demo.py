"""`finetune demo`: the product end to end on this machine, offline, in under two minutes;
:func:`run_demo` tells the story, cli/demo.py only parses and prints. Two generated image sets
are prepared into RecordIO; ResNet-18 is pre-trained on the source task (standing in for
ImageNet weights), fine-tuned on the target task with its head replaced, and trained there from
random weights with the same data, seed and schedule; the two are compared (demo_claim.py: the
demo exits 1 when the claim does not hold) and the runs reported (cost: zero here).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

from finetune import settings
from finetune.data.datasets import prepare_folder
from finetune.data.prepare import PrepareResult, Progress
from finetune.data.summary import summary_lines
from finetune.data.synth import SynthSpec, generate
from finetune.engines import registry
from finetune.errors import FinetuneError, UsageError
from finetune.report.render import Report, build_report, render
from finetune.runs.facts import finished_facts
from finetune.runs.ledger import open_default
from finetune.runs.run import Run
from finetune.service.demo_claim import Transfer, transfer
from finetune.service.launch import LaunchRequest, start
from finetune.service.sync import follow


@dataclass(frozen=True)
class DemoSpec:
    workdir: Path | None = None  # None: <data dir>/demo (``root``)
    # the engine a user runs on today's GPUs; `--engine mxnet` tells the same story on the
    # studies' engine
    engine: str = "torch"
    classes: int = 6
    per_class: int = 60
    image_side: int = 64  # generated images: shorter side between this and 1.5x this
    resize: int = 40
    epochs: int = 5  # docs/decisions/060-demo-transfer-claim.md
    seed: int = 0

    @property
    def root(self) -> Path:
        """Where the demo keeps its images and datasets: ``workdir``, else <data dir>/demo."""
        if self.workdir is not None:
            return self.workdir
        return settings.get().data_dir / "demo"


def images_step(spec: DemoSpec, task: str) -> Path:
    """Generate one task's image set once (kept between demo runs). The source task has
    more classes and another seed, so its classes differ from the target's."""
    root = spec.root / "images" / task
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
    return prepare_folder(images, spec.root / "datasets" / task, task, params, progress=progress)


def train_step(
    spec: DemoSpec, dataset: Path, overrides: list[str], ledger, on_epoch=None, live=None
):
    """One local run of the engine's smoke recipe, followed to the end; the ledger's Run.
    ``live``: a display shown while it trains (``start()``, ``feed(log_text)`` of the
    trainer's log as it comes, ``epoch_done(epoch)``, ``stop()``: cli._progress.EpochDisplay)."""
    recipe = registry.get(spec.engine).smoke_recipe
    request = LaunchRequest(recipe=recipe, dataset=str(dataset), overrides=overrides)
    seen = {"n": 0}

    def update(run, status, epochs, text):
        if live is not None and text:
            live.feed(text)  # its progress lines move the bar; nothing else is printed
        for e in epochs[seen["n"] :]:
            if live is not None:
                live.epoch_done(e.epoch)
            if on_epoch:
                on_epoch(e)
        seen["n"] = max(seen["n"], len(epochs))

    run, backend = start(request, ledger)
    if live is None:
        return follow(run, backend, ledger, update)
    live.start()
    try:
        return follow(run, backend, ledger, update)
    finally:
        live.stop()


# Pre-training takes the rate that learns this set fastest; fine-tuning, the Caltech recipes'
# (a faster head); scratch, exactly fine-tuning's (docs/decisions/060-demo-transfer-claim.md).
_COMMON = ["batch_per_device=16", "kind=cosine", "steps=[]"]
PRETRAINING = [*_COMMON, "lr_per_device=0.02"]
FINETUNING = [*_COMMON, "lr_per_device=0.01", "head_lr_mult=5"]


def pretrain_overrides(spec: DemoSpec) -> list[str]:
    return [f"epochs={spec.epochs}", *PRETRAINING, "pretrained=false"]


def finetune_overrides(spec: DemoSpec, weights: Path) -> list[str]:
    return [f"epochs={spec.epochs}", *FINETUNING, "pretrained=true", f"weights={weights}"]


def scratch_overrides(spec: DemoSpec) -> list[str]:
    """The fine-tuning run's settings, from random weights: the transfer baseline."""
    return [f"epochs={spec.epochs}", *FINETUNING, "pretrained=false"]


def claim_applies(spec: DemoSpec) -> bool:
    """The transfer claim is judged at the default data and schedule (any engine or folder)."""
    return replace(spec, workdir=None, engine="torch") == DemoSpec()


def weights_of(run, engine: str) -> Path:
    """The weight file a finished run of ``engine`` left in its model directory."""
    return Path(run.run_dir) / "ml" / "model" / registry.get(engine).weights_file


@dataclass
class DemoResult:
    """The three runs, the transfer comparison and the report of the runs."""

    pre: Run
    fine: Run
    scratch: Run
    transfer: Transfer
    report: Report | None = None
    completed: bool = field(init=False)

    def __post_init__(self) -> None:
        self.completed = self.fine.status == self.scratch.status == "completed"

    @property
    def ok(self) -> bool:
        """The runs completed and the claim, where it applies, holds: the demo's exit 0."""
        return self.completed and not self.transfer.failed


def run_demo(
    spec: DemoSpec,
    on_step: Callable[[str], None],
    on_epoch: Callable | None = None,
    progress: Callable[[], AbstractContextManager] | None = None,
    live=None,
) -> DemoResult:
    """The 5-step story: each heading, summary line and the report go to ``on_step``, each finished
    epoch to ``on_epoch``; ``progress()`` gives the bars for preparing, ``live`` the display of
    each training (train_step). One ledger, opened once. A failed pre-training raises (there
    are no weights to fine-tune from)."""
    registry.get(spec.engine, UsageError)  # an unknown engine: refused with a suggestion
    spec = replace(spec, workdir=spec.root)
    on_step(f"1/5 Generating and preparing images under {spec.workdir}")
    with (progress or nullcontext)() as bars:
        source = prepare_step(spec, "source", bars)
        target = prepare_step(spec, "target", bars)
    for line in summary_lines(target.manifest, target.out, target.reused):
        on_step(line)
    with open_default() as ledger:
        on_step(
            f"2/5 Pre-training ResNet-18 ({spec.engine} engine) on the source task "
            f"({source.manifest.num_classes} classes, random init): stands in for ImageNet "
            "weights, offline"
        )
        pre = train_step(spec, source.out, pretrain_overrides(spec), ledger, on_epoch, live)
        if pre.status != "completed":
            raise FinetuneError(
                f"pre-training run {pre.id} ended {pre.status}: {pre.exit_reason}",
                f"see `finetune runs logs {pre.id}`.",
            )
        on_step(
            f"3/5 Fine-tuning on the target task ({target.manifest.num_classes} classes) "
            f"from those weights; the classifier head is replaced"
        )
        weights = weights_of(pre, spec.engine)
        fine = train_step(
            spec, target.out, finetune_overrides(spec, weights), ledger, on_epoch, live
        )
        on_step("4/5 The same network on the target task from random weights (the baseline)")
        scratch = train_step(spec, target.out, scratch_overrides(spec), ledger, on_epoch, live)
        compared = transfer(ledger.epochs(fine.id), ledger.epochs(scratch.id), claim_applies(spec))
        result = DemoResult(pre, fine, scratch, compared)
        on_step("Validation accuracy, fine-tuned vs from scratch (same data, seed, schedule):")
        for line in result.transfer.lines():
            on_step(line)
        on_step("5/5 Report")
        result.report = build_report(finished_facts(ledger, [pre.id, fine.id, scratch.id]))
    on_step(render(result.report, "table").rstrip("\n"))
    on_step(
        f"Next: `finetune runs show {fine.id}`, `finetune cost-report`, `finetune launch --help`."
    )
    return result
