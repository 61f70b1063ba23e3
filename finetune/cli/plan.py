"""`finetune plan`: every way to run a recipe on the cloud, its time and euros, ranked."""

from __future__ import annotations

from typing import Annotated

import typer

from finetune.cli._options import (
    Backend,
    Budget,
    Classes,
    Dataset,
    Deadline,
    Engine,
    Epochs,
    Format,
    Help,
    Option,
    Overrides,
    Plot,
    Recipe,
    Region,
    SpotOrOnDemand,
    flag_set,
    typed_flags,
)
from finetune.cli._render import check_format
from finetune.ranking.plot import plot_plan
from finetune.ranking.rank import plan_recipe
from finetune.ranking.render import FORMATS, render
from finetune.report.plot import check_path
from finetune.units.durations import parse_duration
from finetune.units.eurocap import check_max_eur


@flag_set
class Workload:
    """What is planned: the dataset (or its counts alone) and the epochs."""

    dataset: Dataset = None
    epochs: Annotated[Epochs[int | None], Help("Epochs to plan for (default: the recipe's).")] = (
        None
    )
    images: Annotated[
        int | None,
        Option(min=1, help="Plan from counts alone: training images an epoch (with --classes)."),
    ] = None
    classes: Annotated[Classes[int | None], Help("With --images: the dataset's classes.")] = None

    def counts(self) -> tuple[int, int] | None:
        """(images, classes) to plan from counts alone; refused unless both or neither."""
        if (self.images is None) != (self.classes is None) or (self.images and self.dataset):
            raise typer.BadParameter(
                "give --images and --classes together, instead of --dataset", param_hint="--images"
            )
        return (self.images, self.classes) if self.images and self.classes else None


@flag_set
class Picks:
    """The two runs named on top: the cheapest within a time, the fastest within euros."""

    deadline: Annotated[Deadline, Help("Pick the cheapest done within this, e.g. 3h.")] = None
    budget: Annotated[Budget, Help("Pick the fastest that costs at most this (EUR).")] = None


@flag_set
class Offers:
    """Which ways to run the recipe are weighed."""

    spot: Annotated[
        SpotOrOnDemand[bool | None], Help("Only spot, or only on-demand (default: both).")
    ] = None
    region: Annotated[
        Region[list[str] | None],
        Help("Region to price (repeat; default: FINETUNE_REGION, else us-east-1)."),
    ] = None
    backend: Annotated[
        Backend[str | None], Help("Only this cloud backend (default: every one).")
    ] = None
    engine: Annotated[
        Engine[str | None], Help("torch or mxnet (default: the recipe's engine).")
    ] = None
    max_hosts: Annotated[
        int, Option(min=1, max=64, help="Instances per run to consider (1..N).")
    ] = 4
    live_spot: Annotated[
        bool,
        Option("--live-spot", help="Spot rows at EC2's current spot prices (needs credentials)."),
    ] = False


@flag_set
class Shown:
    """What is printed, and drawn."""

    fmt: Annotated[Format, Help("table, json or csv.")] = "table"
    top: Annotated[int, Option(min=1, help="Table: show the N cheapest rows (and the picks).")] = 10
    all_rows: Annotated[bool, Option("--all", help="Table: show every row.")] = False
    explain: Annotated[
        bool,
        Option("--explain", help="Table: each shown row's throughput, its band and its source."),
    ] = False
    plot: Annotated[Plot, Help("Also draw time vs euros into this .png or .svg.")] = None


@typed_flags
def plan(
    recipe: Recipe,
    overrides: Overrides = None,
    *,
    work: Workload,
    picks: Picks,
    offers: Offers,
    shown: Shown,
) -> None:
    """Every instance type x GPUs x hosts x region x market x backend that can run RECIPE's
    engine: predicted time and euros, ranked by euros with the Pareto front marked; the
    cheapest meeting --deadline and the fastest within --budget named on top with their
    `finetune launch` command (times within 10 % or a minute of the quickest are a tie, which
    the cheaper wins). The table shows the --top rows; JSON and CSV carry every row and field.
    Needs only the dataset's counts: Caltech-256 plans before it is downloaded. Estimates
    only: nothing is created and no AWS call is made."""
    fmt = check_format(shown.fmt, FORMATS)
    counts = work.counts()
    if shown.plot:
        check_path(shown.plot)
    extra = [f"engine={offers.engine}"] if offers.engine else []
    extra += [f"schedule.epochs={work.epochs}"] if work.epochs else []
    result = plan_recipe(
        recipe,
        work.dataset,
        [*(overrides or ()), *extra],
        regions=tuple(offers.region or ()),
        backend=offers.backend,
        spot=offers.spot,
        deadline_s=parse_duration(picks.deadline, "--deadline") if picks.deadline else None,
        budget_eur=check_max_eur(picks.budget, "--budget"),
        max_hosts=offers.max_hosts,
        live_spot=offers.live_spot,
        counts=counts,
    )
    top = None if shown.all_rows else shown.top
    typer.echo(render(result, fmt, top=top, explain=shown.explain), nl=False)
    if shown.plot:
        typer.echo(f"Plot written to {plot_plan(result, shown.plot)}", err=True)
