"""`finetune demo`: offline end-to-end run on this machine."""

from __future__ import annotations

from pathlib import Path

import typer


def demo(
    workdir: Path = typer.Option(
        None, "--dir", help="Work folder for images, dataset and runs. Default: <data dir>/demo."
    ),
    classes: int = typer.Option(6, min=2, help="Number of generated classes."),
    per_class: int = typer.Option(40, min=4, help="Generated images per class."),
) -> None:
    """Generate a small learnable image set, prepare it into RecordIO, and show the result:
    the whole product offline, with no AWS account and no GPU."""
    from finetune import settings
    from finetune.cli._render import progress_bars
    from finetune.data.summary import summary_lines
    from finetune.demo import DemoSpec, images_step, prepare_step

    spec = DemoSpec(workdir or settings.get().data_dir / "demo", classes, per_class)
    typer.echo(f"1/2 Generating {classes} classes x {per_class} images under {spec.workdir}")
    images = images_step(spec)
    typer.echo("2/2 Preparing RecordIO")
    with progress_bars() as progress:
        result = prepare_step(spec, images, progress)
    for line in summary_lines(result.manifest, result.out, result.reused):
        typer.echo(line)
