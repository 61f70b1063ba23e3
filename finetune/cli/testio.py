"""`finetune test-io`: read speed of a prepared dataset, as training reads it."""

from __future__ import annotations

import typer


def test_io(
    dataset: str = typer.Argument(
        ..., help="Prepared dataset: a folder, or a name under the data dir."
    ),
    split: str = typer.Option("train", help="Which split to read: train or val."),
    threads: int = typer.Option(0, min=0, help="Decode threads (0: one per CPU)."),
    batch_size: int = typer.Option(32, min=1, help="Images per batch."),
    data_shape: int = typer.Option(224, min=16, help="Crop size in pixels."),
    max_images: int = typer.Option(0, min=0, help="Stop after this many images (0: one pass)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Read and decode a prepared .rec the way training does and print images/s
    (MXNet's --test-io as a command). Needs the MXNet engine."""
    from dataclasses import asdict

    from finetune import settings
    from finetune.cli._render import echo_json
    from finetune.data.readspeed import measure

    r = measure(settings.dataset_path(dataset), split, threads, batch_size, data_shape, max_images)
    if as_json:
        echo_json({**asdict(r), "images_per_second": r.images_per_second})
    else:
        typer.echo(
            f"{r.split}: {r.images} images in {r.seconds:.2f} s = {r.images_per_second:,.0f} "
            f"images/s ({r.threads} decode threads, batch {r.batch_size}, after warm-up)"
        )
