"""`finetune demo`: offline end-to-end run on this machine."""

from __future__ import annotations

from pathlib import Path

import typer


def demo(
    workdir: Path = typer.Option(
        None, "--dir", help="Work folder for images and datasets. Default: <data dir>/demo."
    ),
    classes: int = typer.Option(6, min=2, help="Classes of the target task."),
    per_class: int = typer.Option(60, min=8, help="Generated images per class."),
    epochs: int = typer.Option(8, min=1, help="Epochs of each training run."),
) -> None:
    """The whole product offline, with no AWS account and no GPU: generate two small image
    sets, prepare them into RecordIO, pre-train ResNet-18 on one, fine-tune it on the other
    (weights loaded, classifier head replaced), train the same network on it from scratch,
    and show transfer against scratch side by side; then the cost report of the runs."""
    from finetune import settings
    from finetune.cli._follow import epoch_line
    from finetune.cli._render import progress_bars
    from finetune.data.summary import summary_lines
    from finetune.demo import (
        DemoSpec,
        finetune_overrides,
        prepare_step,
        pretrain_overrides,
        scratch_overrides,
        train_step,
        transfer,
        weights_of,
    )
    from finetune.errors import FinetuneError

    spec = DemoSpec(workdir or settings.get().data_dir / "demo", classes, per_class, epochs=epochs)
    typer.echo(f"1/5 Generating and preparing images under {spec.workdir}")
    with progress_bars() as progress:
        source = prepare_step(spec, "source", progress)
        target = prepare_step(spec, "target", progress)
    for line in summary_lines(target.manifest, target.out, target.reused):
        typer.echo(line)
    typer.echo(
        f"2/5 Pre-training ResNet-18 on the source task ({source.manifest.num_classes} "
        "classes, random init): stands in for ImageNet weights, offline"
    )
    show = lambda e: typer.echo(epoch_line(e))  # noqa: E731
    pre = train_step(source.out, pretrain_overrides(spec), show)
    if pre.status != "completed":
        raise FinetuneError(
            f"pre-training run {pre.id} ended {pre.status}: {pre.exit_reason}",
            f"see `finetune runs logs {pre.id}`.",
        )
    typer.echo(
        f"3/5 Fine-tuning on the target task ({target.manifest.num_classes} classes) "
        f"from those weights; the classifier head is replaced"
    )
    run = train_step(target.out, finetune_overrides(spec, weights_of(pre)), show)
    typer.echo("4/5 The same network on the target task from random weights (the baseline)")
    scratch = train_step(target.out, scratch_overrides(spec), show)
    from finetune.runs.ledger import open_default

    with open_default() as ledger:
        result = transfer(ledger.epochs(run.id), ledger.epochs(scratch.id))
    typer.echo("Validation accuracy, fine-tuned vs from scratch (same data, seed, schedule):")
    for line in result.lines():
        typer.echo(line)
    typer.echo("5/5 Report")
    from finetune.report.render import build_report, render
    from finetune.runs.facts import finished_facts

    with open_default() as ledger:
        ids = [pre.id, run.id, scratch.id]
        typer.echo(render(build_report(finished_facts(ledger, ids)), "table"))
    typer.echo(
        f"Next: `finetune runs show {run.id}`, `finetune cost-report`, `finetune launch --help`."
    )
    if run.status != "completed" or scratch.status != "completed":
        raise typer.Exit(1)
