"""`finetune cost-report`: time, throughput, scaling efficiency and euros over runs."""

from __future__ import annotations

from typing import Annotated

import typer

from finetune.cli._options import Format, Help, Plot, RecipeFilter, typed_flags
from finetune.cli.runs import note_read_only
from finetune.report.plot import check_path, plot_report
from finetune.report.render import check_format
from finetune.runs.ledger import open_default
from finetune.service.report import cost_report as select


@typed_flags
def cost_report(
    runs: list[str] = typer.Argument(None, help="Run ids (default: every finished run)."),
    recipe: RecipeFilter = None,
    since: str = typer.Option(None, help="Only runs created on or after this date (YYYY-MM-DD)."),
    sweep: str = typer.Option(
        None, help="The seeds' table of one `finetune sweep` (its id), with the physical limit."
    ),
    fmt: Annotated[Format, Help("table, json, csv or markdown (md).")] = "table",
    plot: Annotated[
        Plot, Help("Also draw speedup vs ideal and cost vs time into this .png or .svg.")
    ] = None,
    target_accuracy: float = typer.Option(
        None,
        help="Also show time and EUR to reach this validation accuracy (e.g. 0.85); with "
        "--sweep the default is the best accuracy every cell reached.",
    ),
) -> None:
    """Per run: recipe, dataset, status, backend, engine, instance, devices, spot, wall and
    billable time, images/s (per run and per device), speedup and efficiency (N > 1 devices,
    against a different 1-device run of the same recipe, dataset, model, engine, GPU model,
    batch and image size), best validation accuracy, EUR total and per epoch; then totals,
    notes (runs skipped and why) and the price and rate provenance."""
    fmt = check_format(fmt)  # before any work: a typo should not wait for the ledger
    if plot:
        check_path(plot)
    with open_default(read_only_ok=True) as ledger:
        note_read_only(ledger)
        result = select(ledger, runs or (), recipe, since, sweep, target_accuracy)
    text = result.text(fmt)
    typer.echo(text if text.endswith("\n") else text + "\n", nl=False)
    if plot:
        typer.echo(f"Plot written to {plot_report(result.report, plot)}", err=True)
