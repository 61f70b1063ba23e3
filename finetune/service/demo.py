"""`finetune demo`: the product end to end on this machine, offline, in under two minutes;
:func:`run_demo` tells the story, cli/demo.py only parses and prints.

1. generate and prepare (RecordIO) two image sets, a source and a target task of other
   classes (finetune.service.demo_data);
2. pre-train ResNet-18 on the source task from random weights: the stand-in for ImageNet
   weights, which cannot be downloaded offline;
3. fine-tune on the target task from those weights, the classifier head replaced for the
   target's classes, exactly as with real ImageNet weights;
4. train the same network on the target task from random weights, same data, seed and
   schedule; both learning curves side by side, in a table and a PNG, and the claim
   (demo_claim.py) checked: the demo exits 1 if it does not hold;
5. report the runs (throughput, accuracy, cost: zero on your own machine).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

from finetune.data.summary import summary_lines
from finetune.engines import registry
from finetune.errors import FinetuneError, UsageError
from finetune.report.plot import plot_transfer
from finetune.report.render import Report, build_report, render
from finetune.runs.facts import finished_facts
from finetune.runs.ledger import open_default
from finetune.runs.run import Run
from finetune.service.demo_claim import Transfer, transfer
from finetune.service.demo_data import DemoSpec, check_sizes, prepare_step
from finetune.service.launch import LaunchRequest, start
from finetune.service.sync import follow


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


# Adam: the old SGD with a head learning 5x faster drove both losses to 4-5x chance and back
# up. The baseline from scratch gets exactly the fine-tuning settings (docs/decisions/180-*).
_COMMON = ["batch_per_device=16", "kind=cosine", "steps=[]", "optimizer.name=adam"]
PRETRAINING = [*_COMMON, "lr_per_device=0.001"]  # from random weights: a faster rate
FINETUNING = [*_COMMON, "lr_per_device=0.0003"]  # gentler: the new head spares the features


def _schedule(spec: DemoSpec) -> list[str]:
    return [f"epochs={spec.epochs}", f"image_size={spec.image_size}", f"seed={spec.seed}"]


def pretrain_overrides(spec: DemoSpec) -> list[str]:
    return [*_schedule(spec), *PRETRAINING, "pretrained=false"]


def finetune_overrides(spec: DemoSpec, weights: Path) -> list[str]:
    return [*_schedule(spec), *FINETUNING, "pretrained=true", f"weights={weights}"]


def scratch_overrides(spec: DemoSpec) -> list[str]:
    """The fine-tuning run's settings, from random weights: the transfer baseline."""
    return [*_schedule(spec), *FINETUNING, "pretrained=false"]


def claim_applies(spec: DemoSpec) -> bool:
    """The transfer claim is judged at the default data and schedule, on any engine, folder
    or seed (its margins were measured at three)."""
    return replace(spec, workdir=None, engine="torch", seed=0) == DemoSpec()


def weights_of(run, engine: str) -> Path:
    """The weight file a finished run of ``engine`` left in its model directory."""
    return Path(run.run_dir) / "ml" / "model" / registry.get(engine).weights_file


@dataclass
class DemoResult:
    """The three runs, the transfer comparison, its plot and the report of the runs."""

    pre: Run
    fine: Run
    scratch: Run
    transfer: Transfer
    report: Report | None = None
    plot: Path | None = None  # the learning curves' PNG (None: it could not be drawn)
    completed: bool = field(init=False)

    def __post_init__(self) -> None:
        self.completed = self.fine.status == self.scratch.status == "completed"

    @property
    def ok(self) -> bool:
        """The runs completed and the claim, where it applies, holds: the demo's exit 0."""
        return self.completed and not self.transfer.failed


def plot_step(spec: DemoSpec, result: DemoResult, on_step: Callable[[str], None]) -> Path | None:
    """Both learning curves in one PNG beside the demo's datasets; None (said) where it
    cannot be drawn: the claim is judged on the numbers all the same."""
    path = spec.root / "learning-curves.png"
    ids = f"{result.pre.id} (source), {result.fine.id} (fine-tuned), {result.scratch.id}"
    provenance = f"finetune demo --engine {spec.engine} --seed {spec.seed}: runs {ids} (scratch)"
    try:
        plot_transfer(result.transfer, path, provenance)
    except FinetuneError as exc:  # matplotlib missing, a file of someone else's there
        on_step(f"Learning curves: not drawn: {exc}")
        return None
    on_step(f"Learning curves: {path}")
    return path


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
    registry.get(spec.engine, UsageError)  # an unknown name: with a suggestion
    check_sizes(spec)
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
            f"({source.manifest.num_classes} shapes, random init): stands in for ImageNet "
            "weights, offline"
        )
        pre = train_step(spec, source.out, pretrain_overrides(spec), ledger, on_epoch, live)
        if pre.status != "completed":
            raise FinetuneError(
                f"pre-training run {pre.id} ended {pre.status}: {pre.exit_reason}",
                f"see `finetune runs logs {pre.id}`.",
            )
        on_step(
            f"3/5 Fine-tuning on the target task ({target.manifest.num_classes} other shapes) "
            "from those weights; the classifier head is replaced"
        )
        weights = weights_of(pre, spec.engine)
        fine = train_step(
            spec, target.out, finetune_overrides(spec, weights), ledger, on_epoch, live
        )
        on_step("4/5 The same network on the target task from random weights (the baseline)")
        scratch = train_step(spec, target.out, scratch_overrides(spec), ledger, on_epoch, live)
        fine_e, scratch_e, pre_e = (ledger.epochs(r.id) for r in (fine, scratch, pre))
        compared = transfer(fine_e, scratch_e, pre_e, judged=claim_applies(spec))
        result = DemoResult(pre, fine, scratch, compared)
        on_step("Validation accuracy, fine-tuned vs from scratch (same data, seed, schedule):")
        for line in result.transfer.lines():
            on_step(line)
        result.plot = plot_step(spec, result, on_step)
        on_step("5/5 Report")
        result.report = build_report(finished_facts(ledger, [pre.id, fine.id, scratch.id]))
    on_step(render(result.report, "table").rstrip("\n"))
    on_step(
        f"Next: `finetune runs show {fine.id}`, `finetune cost-report`, `finetune launch --help`."
    )
    return result
