"""`finetune demo`: parse, call finetune.service.demo.run_demo (it prints through echo)."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from finetune.cli._follow import epoch_line
from finetune.cli._options import Classes, Engine, Epochs, Help, typed_flags
from finetune.cli._progress import EpochDisplay
from finetune.cli._render import is_quiet, progress_bars
from finetune.service import demo as service_demo

_DEFAULT = service_demo.DemoSpec()


@typed_flags
def demo(
    workdir: Path = typer.Option(None, "--dir", help="Work folder. Default: <data dir>/demo."),
    engine: Annotated[
        Engine[str], Help("torch (PyTorch, today's GPUs) or mxnet (the studies' engine).")
    ] = "torch",
    classes: Annotated[
        Classes[int], Help("Classes (shapes) of the target task, at most 12.")
    ] = _DEFAULT.classes,
    per_class: int = typer.Option(
        _DEFAULT.per_class,
        min=8,
        help="Generated target images per class: 30 to train on, the rest to "
        "validate on (the source task: 1.5x as many per class).",
    ),
    epochs: Annotated[Epochs[int], Help("Epochs of each training run.")] = _DEFAULT.epochs,
    seed: int = typer.Option(0, min=0, help="Seed of the images, the splits and the runs."),
) -> None:
    """The whole product offline, no AWS, no GPU: two generated image sets prepared into
    RecordIO, ResNet-18 pre-trained on one, fine-tuned on the other (head replaced) and
    trained from scratch, both learning curves side by side (table and PNG), then the cost
    report. Exits 1 when fine-tuning did not beat scratch as the table says it must."""
    spec = service_demo.DemoSpec(
        workdir, engine.strip().lower(), classes, per_class, epochs=epochs, seed=seed
    )
    # a live bar per epoch while each run trains, as `launch` shows: on a terminal only (a
    # pipe or a log gets the epoch lines alone)
    live = EpochDisplay(epochs, quiet=is_quiet() or not sys.stderr.isatty())
    result = service_demo.run_demo(
        spec, typer.echo, lambda e: typer.echo(epoch_line(e)), progress_bars, live=live
    )
    if result.completed and result.transfer.failed:
        typer.echo(
            "The demo's transfer claim did not hold on this machine (table above): the runs "
            "completed, but a check marked NO failed.",
            err=True,
        )
    raise typer.Exit(0 if result.ok else 1)
