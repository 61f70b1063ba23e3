"""`finetune test-io`: read speed of a prepared dataset, as training reads it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from finetune import settings
from finetune.cli._options import Format, Help, Json, typed_flags
from finetune.cli._records import record_csv
from finetune.cli._render import echo_json, info, output_format
from finetune.data.readspeed import measure


@typed_flags
def test_io(
    dataset: str = typer.Argument(
        ..., help="Prepared dataset: a folder, or a name under the data dir."
    ),
    split: str = typer.Option("train", help="Which split to read: train or val."),
    threads: int = typer.Option(
        0, min=0, help="Decode threads to ask MXNet for (0: one per CPU; it may use fewer)."
    ),
    batch_size: int = typer.Option(
        32, min=1, help="Images per batch (made smaller when the split is too small for it)."
    ),
    data_shape: int = typer.Option(224, min=16, help="Crop size in pixels."),
    max_images: int = typer.Option(0, min=0, help="Stop after this many images (0: one pass)."),
    fmt: Annotated[Format, Help("table (a sentence), json or csv.")] = "table",
    as_json: Json = False,
) -> None:
    """Read and decode a prepared .rec the way training does and print images/s
    (MXNet's --test-io as a command). Needs the MXNet engine."""
    fmt = output_format(fmt, as_json)
    folder, note = settings.resolve_dataset(dataset)
    if note:
        info(f"Note: {note}.")
    r = measure(folder, split, threads, batch_size, data_shape, max_images)
    record = {**asdict(r), "images_per_second": r.images_per_second}
    if fmt == "json":
        echo_json(record)
        return
    if fmt == "csv":
        typer.echo(record_csv(record), nl=False)
        return
    threads_text = f"{r.threads} decode thread{'s' if r.threads > 1 else ''}"
    if r.threads != r.asked_threads:
        threads_text += f" (asked for {r.asked_threads}; MXNet caps it on this machine)"
    batch = f"batch {r.batch_size}"
    if r.batch_size != r.asked_batch_size:
        batch += f" (not {r.asked_batch_size}: the split is small)"
    typer.echo(
        f"{r.split}: {r.images} images in {r.seconds:.2f} s = {r.images_per_second:,.0f} "
        f"images/s ({threads_text}, {batch}, after warm-up)"
    )
