"""`finetune cost-report`: time, throughput, scaling efficiency and euros over runs."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import typer


def cost_report(
    runs: list[str] = typer.Argument(None, help="Run ids (default: every finished run)."),
    recipe: str = typer.Option(None, help="Only runs of this recipe."),
    since: str = typer.Option(None, help="Only runs created on or after this date (YYYY-MM-DD)."),
    fmt: str = typer.Option("table", "--format", help="table, json, csv or markdown (md)."),
    plot: Path = typer.Option(
        None, help="Also draw speedup vs ideal and cost vs time into this .png or .svg."
    ),
    target_accuracy: float = typer.Option(
        None, help="Also show time and EUR to reach this validation accuracy (e.g. 0.85)."
    ),
) -> None:
    """Per run: backend, instance, GPUs, spot, wall and billable time, images/s (per run and
    per GPU), speedup and efficiency against the 1-GPU run of the same recipe and dataset,
    best validation accuracy, EUR total and per epoch; then totals and the price provenance."""
    from finetune.errors import UsageError
    from finetune.report.render import build_report, check_format, render
    from finetune.runs.facts import finished_facts
    from finetune.runs.ledger import open_default

    fmt = check_format(fmt)  # before any work: a typo should not wait for the ledger
    if plot:
        from finetune.report.plot import check_path

        check_path(plot)
    since_ts = None
    if since:
        try:
            since_ts = datetime.fromisoformat(since).timestamp()
        except ValueError:
            raise UsageError(f"--since {since!r} is not a date", "use YYYY-MM-DD.") from None
    with open_default() as ledger:
        facts = finished_facts(ledger, runs or (), recipe, since_ts)
    if not facts:
        raise UsageError(
            "no finished runs match", "launch one with `finetune launch`, or widen the filters."
        )
    report = build_report(facts, target_accuracy)
    text = render(report, fmt)
    typer.echo(text if text.endswith("\n") else text + "\n", nl=False)
    if plot:
        from finetune.report.plot import plot_report

        typer.echo(f"Plot written to {plot_report(report, plot)}", err=True)
