"""`finetune plan`: every way to run a recipe on the cloud, its time and euros, ranked."""

from __future__ import annotations

from pathlib import Path

import typer

from finetune.cli._options import Dataset, Recipe
from finetune.cli._render import check_format
from finetune.ranking.plot import plot_plan
from finetune.ranking.rank import plan_recipe
from finetune.ranking.render import FORMATS, render
from finetune.report.plot import check_path
from finetune.units.durations import parse_duration
from finetune.units.eurocap import check_max_eur


def plan(
    recipe: Recipe,
    overrides: list[str] = typer.Argument(None, help="Recipe overrides as key=value."),
    dataset: Dataset = None,
    epochs: int = typer.Option(None, min=1, help="Epochs to plan for (default: the recipe's)."),
    images: int = typer.Option(
        None, min=1, help="Plan from counts alone: training images an epoch (with --classes)."
    ),
    classes: int = typer.Option(None, min=2, help="With --images: the dataset's classes."),
    deadline: str = typer.Option(None, help="Pick the cheapest done within this, e.g. 3h."),
    budget: float = typer.Option(None, help="Pick the fastest that costs at most this (EUR)."),
    spot: bool = typer.Option(
        None, "--spot/--no-spot", help="Only spot, or only on-demand (default: both)."
    ),
    region: list[str] = typer.Option(
        None, help="Region to price (repeat; default: FINETUNE_REGION, else us-east-1)."
    ),
    backend: str = typer.Option(None, help="Only this cloud backend (default: every one)."),
    engine: str = typer.Option(None, help="torch or mxnet (default: the recipe's engine)."),
    max_hosts: int = typer.Option(4, min=1, max=64, help="Instances per run to consider (1..N)."),
    live_spot: bool = typer.Option(
        False, "--live-spot", help="Spot rows at EC2's current spot prices (needs credentials)."
    ),
    fmt: str = typer.Option("table", "--format", help="table, json or csv."),
    top: int = typer.Option(10, min=1, help="Table: show the N cheapest rows (and the picks)."),
    all_rows: bool = typer.Option(False, "--all", help="Table: show every row."),
    explain: bool = typer.Option(
        False, "--explain", help="Table: each shown row's throughput, its band and its source."
    ),
    plot: Path = typer.Option(None, help="Also draw time vs euros into this .png or .svg."),
) -> None:
    """Every instance type x GPUs x hosts x region x market x backend that can run RECIPE's
    engine: predicted time and euros, ranked by euros with the Pareto front marked; the
    cheapest meeting --deadline and the fastest within --budget named on top with their
    `finetune launch` command (times within 10 % or a minute of the quickest are a tie, which
    the cheaper wins). The table shows the --top rows; JSON and CSV carry every row and field.
    Needs only the dataset's counts: Caltech-256 plans before it is downloaded. Estimates
    only: nothing is created and no AWS call is made."""
    fmt = check_format(fmt, FORMATS)
    if (images is None) != (classes is None) or (images and dataset):
        raise typer.BadParameter(
            "give --images and --classes together, instead of --dataset", param_hint="--images"
        )
    if plot:
        check_path(plot)
    extra = [f"engine={engine}"] if engine else []
    extra += [f"schedule.epochs={epochs}"] if epochs else []
    result = plan_recipe(
        recipe,
        dataset,
        [*(overrides or ()), *extra],
        regions=tuple(region or ()),
        backend=backend,
        spot=spot,
        deadline_s=parse_duration(deadline, "--deadline") if deadline else None,
        budget_eur=check_max_eur(budget, "--budget"),
        max_hosts=max_hosts,
        live_spot=live_spot,
        counts=(images, classes) if images else None,
    )
    typer.echo(render(result, fmt, top=None if all_rows else top, explain=explain), nl=False)
    if plot:
        typer.echo(f"Plot written to {plot_plan(result, plot)}", err=True)
