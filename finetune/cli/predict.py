"""`finetune predict` and `finetune export`: use what a run trained."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from finetune.cli._options import Format, Help, MaxPixels, Out, Overwrite, typed_flags
from finetune.cli._progress import working
from finetune.cli._render import check_format, echo_json, info, rich_table
from finetune.data.imaging import MAX_PIXELS
from finetune.inference.predict import export as run_export
from finetune.inference.predict import predict as run_predict
from finetune.report.text import percent, rows_to_csv
from finetune.textsafe import printable

_RUN = typer.Argument(
    ..., help="Run id (or a unique prefix), or the path of a model folder (e.g. an unpacked "
    "model.tar.gz)."
)  # fmt: skip


@typed_flags
def predict(
    run: str = _RUN,
    images: list[str] = typer.Argument(
        ..., help="Image files, or folders whose images (searched recursively) are classified."
    ),
    top_k: int = typer.Option(5, "--top-k", min=1, help="Classes to show per image, best first."),
    fmt: Annotated[
        Format, Help("table, json or csv (any case). JSON and CSV go to stdout.")
    ] = "table",
    max_pixels: Annotated[
        MaxPixels,
        Help(
            "Skip (and list) images with more pixels than this, before decoding them, as "
            "`prepare` does: a small file can decode to gigabytes."
        ),
    ] = MAX_PIXELS,
) -> None:
    """Classify images with a run's model, applying exactly the validation preprocessing
    the run recorded (preprocessing.json), in batches, with the run's engine. Files that
    are not readable images are skipped and listed on stderr; the exit code is then 3."""
    fmt = check_format(fmt, ("table", "json", "csv"))
    with working(f"Classifying with {run}'s model (loading its engine takes a while)"):
        result = run_predict(run, images, top_k, max_pixels)
    if fmt == "json":
        m = result.model
        head = {"run": m.run_id, "model_dir": str(m.path), "engine": m.engine, "model": m.model}
        skipped = [{"image": name, "reason": why} for name, why in result.skipped]
        predictions = [p.as_dict() for p in result.predictions]
        echo_json({**head, "predictions": predictions, "skipped": skipped})
    elif fmt == "csv":
        typer.echo(_csv(result.predictions), nl=False)
    else:
        folder, rows = _table(result.predictions)
        if folder:
            typer.echo(f"Images under {printable(folder)}:")
        ranked = top_k > 1  # the CSV's columns, a row per class: no "next" cell to wrap
        headers = ["image", *(["rank"] if ranked else []), "class", "probability"]
        rich_table(headers, [r if ranked else [r[0], *r[2:]] for r in rows], text=("class",))
    error = result.skipped_error()
    if error:
        raise error  # after the good ones were printed: stderr and a non-zero exit


@typed_flags
def export(
    run: str = _RUN,
    out: Annotated[
        Out, Help("Folder to create (default: ./RUN-export). It must not exist yet.")
    ] = None,
    overwrite: Annotated[
        Overwrite,
        Help(
            "Replace --out if an earlier `finetune export` wrote it and it holds nothing else "
            "(never '/', the home or the current folder)."
        ),
    ] = False,
) -> None:
    """Export a run's model with its class map (classes.json) and preprocessing
    (preprocessing.json): ONNX (model.onnx, input "data" N x 3 x S x S) for the torch
    engine, the symbol + params pair for MXNet."""
    with working(f"Exporting {run}'s model (loading its engine takes a while)"):
        folder = run_export(run, out, overwrite)
    files = ", ".join(sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")))
    info(f"Exported to {folder}: {files}")


def _table(predictions) -> tuple[str, list[list[str]]]:
    """(the images' common folder, or "" where there is none, and the table's rows: image
    relative to that folder on its first row, rank, class, probability as report.text's
    percent). Paths and class names arrive as the user's files named them: shown inert."""
    names = [p.image for p in predictions]
    folder = os.path.commonpath([os.path.dirname(n) for n in names]) if names else ""
    rows = []
    for p in predictions:
        shown = printable(os.path.relpath(p.image, folder) if folder else p.image)
        for rank, (c, q) in enumerate(zip(p.classes, p.probabilities, strict=True), start=1):
            rows.append([shown if rank == 1 else "", str(rank), printable(c), percent(q)])
    return folder, rows


def _csv(predictions) -> str:
    rows = [
        [p.image, rank, c, label, f"{q:.6g}"]
        for p in predictions
        for rank, (c, label, q) in enumerate(
            zip(p.classes, p.labels, p.probabilities, strict=True), start=1
        )
    ]
    return rows_to_csv(["image", "rank", "class", "label", "probability"], rows)
