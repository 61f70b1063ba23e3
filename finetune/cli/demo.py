"""`finetune demo`: parse, call finetune.service.demo.run_demo (it prints through echo)."""

from pathlib import Path

import typer


def demo(
    workdir: Path = typer.Option(None, "--dir", help="Work folder. Default: <data dir>/demo."),
    engine: str = typer.Option(
        "torch", help="torch (PyTorch, today's GPUs) or mxnet (the studies' engine)."
    ),
    classes: int = typer.Option(6, min=2, max=12, help="Classes (shapes) of the target task."),
    per_class: int = typer.Option(
        100,
        min=8,
        help="Generated target images per class: 30 to train on, the rest to "
        "validate on (the source task: 1.5x as many per class).",
    ),
    epochs: int = typer.Option(5, min=1, help="Epochs of each training run."),
    seed: int = typer.Option(0, min=0, help="Seed of the images, the splits and the runs."),
) -> None:
    """The whole product offline, no AWS, no GPU: two generated image sets prepared into
    RecordIO, ResNet-18 pre-trained on one, fine-tuned on the other (head replaced) and
    trained from scratch, both learning curves side by side (table and PNG), then the cost
    report. Exits 1 when fine-tuning did not beat scratch as the table says it must."""
    import sys

    from finetune.cli._follow import epoch_line
    from finetune.cli._progress import EpochDisplay
    from finetune.cli._render import is_quiet, progress_bars
    from finetune.service.demo import DemoSpec, run_demo

    spec = DemoSpec(workdir, engine.strip().lower(), classes, per_class, epochs=epochs, seed=seed)
    # a live bar per epoch while each run trains, as `launch` shows: on a terminal only (a
    # pipe or a log gets the epoch lines alone)
    live = EpochDisplay(epochs, quiet=is_quiet() or not sys.stderr.isatty())
    result = run_demo(
        spec, typer.echo, lambda e: typer.echo(epoch_line(e)), progress_bars, live=live
    )
    if result.completed and result.transfer.failed:
        typer.echo(
            "The demo's transfer claim did not hold on this machine (table above): the runs "
            "completed, but a check marked NO failed.",
            err=True,
        )
    raise typer.Exit(0 if result.ok else 1)
