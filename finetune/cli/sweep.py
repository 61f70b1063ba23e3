"""`finetune sweep`: one recipe over a grid of instances, batch sizes and engines."""

from __future__ import annotations

from typing import Annotated

import typer

from finetune.cli._options import (
    Backend,
    Dataset,
    DryRun,
    Format,
    Help,
    Instance,
    Json,
    MaxEur,
    Option,
    Overrides,
    Recipe,
    Region,
    Spot,
    flag_set,
    typed_flags,
)
from finetune.cli._render import echo_json, emit_table, output_format
from finetune.errors import FinetuneError
from finetune.runs.ledger import open_default
from finetune.sweep.cells import HEADERS, as_dict, plan_sweep, table_rows
from finetune.sweep.execution import run_sweep


@flag_set
class Cells:
    """The dataset every cell trains on, and the grid of its cells."""

    dataset: Dataset = None
    grid: Annotated[
        list[str] | None,
        Option(
            help="KEY=V1,V2 (repeat): instance, count, cpus (local), batch_per_device, engine, "
            "or any recipe key. Every combination is one run."
        ),
    ] = None


@flag_set
class Where:
    """Where every cell runs, and the most the sweep may cost."""

    backend: Annotated[Backend[str], Help("Where every cell runs: local, sagemaker or ec2.")] = (
        "local"
    )
    instance: Annotated[Instance, Help("Cloud: the instance type when the grid has none.")] = None
    region: Annotated[
        Region[str | None], Help("Cloud: the region to price (default: us-east-1).")
    ] = None
    spot: Annotated[Spot, Help("Cloud: spot capacity for every cell.")] = False
    max_eur: Annotated[
        MaxEur, Help("Refuse to start when the total estimate exceeds this many euros.")
    ] = None


@flag_set
class Running:
    """How the cells run: how many at once, which again, or none."""

    parallel: Annotated[
        int, Option(min=1, help="Runs at a time on the cloud (always 1 on the local backend).")
    ] = 1
    retry_failed: Annotated[
        bool, Option("--retry-failed", help="Run failed, stopped or interrupted cells again.")
    ] = False
    dry_run: Annotated[DryRun, Help("Show the cells and estimates; run nothing.")] = False


SweepFormat = Annotated[
    Format, Help("table, json (the plan with --dry-run, else the result) or csv.")
]


@typed_flags
def sweep(
    recipe: Recipe,
    overrides: Annotated[
        Overrides, Help("Recipe overrides for every cell, as key=value (e.g. epochs=2).")
    ] = None,
    *,
    cells: Cells,
    where: Where,
    running: Running,
    fmt: SweepFormat = "table",
    as_json: Json = False,
) -> None:
    """Run RECIPE once per grid cell, with batch and learning rate derived per cell (linear
    scaling rule) and a euro estimate each; refuse above --max-eur. Running the same sweep
    again resumes it: finished cells are not run again. Report: cost-report --sweep ID."""
    fmt = output_format(fmt, as_json)
    as_json = fmt == "json"
    sp = plan_sweep(
        recipe, cells.dataset, where.backend, cells.grid or [], overrides=overrides or (),
        instance=where.instance, region=where.region, spot=where.spot,
    )  # fmt: skip
    if as_json and running.dry_run:
        echo_json(as_dict(sp))
    elif fmt == "csv":
        emit_table(fmt, HEADERS, table_rows(sp), as_dict(sp)["cells"])
    elif not as_json:
        on = where.backend
        typer.echo(f"Sweep {sp.sweep_id}: {len(sp.cells)} run(s) of {sp.recipe} on {on}")
        emit_table(fmt, HEADERS, table_rows(sp), [])
        total = (
            "unknown (a cell has no estimate)" if sp.total_eur is None else f"{sp.total_eur:.2f}"
        )
        typer.echo(f"Total estimate: {total} EUR")
    sp.check_budget(where.max_eur)
    if running.dry_run:
        return
    _run(sp, running.parallel, running.retry_failed, as_json)


def _run(sp, parallel: int, retry_failed: bool, as_json: bool) -> None:
    def on_event(what, cell, detail):
        shown = getattr(detail, "id", detail)
        status = f" {detail.status}" if what == "finished" else ""
        typer.echo(f"  {cell.cell.label() or sp.recipe}: {what} {shown}{status}", err=True)

    with open_default() as ledger:
        result = run_sweep(sp, ledger, parallel=parallel, retry_failed=retry_failed,
                           on_event=on_event)  # fmt: skip
    if as_json:
        echo_json({"sweep_id": sp.sweep_id, "runs": {k: r.id for k, r in result.runs.items()},
                   "launched": result.launched, "failed": result.failed})  # fmt: skip
    typer.echo(f"Report: finetune cost-report --sweep {sp.sweep_id}", err=True)
    if result.incomplete:
        raise FinetuneError(
            f"{len(result.incomplete)} cell(s) of sweep {sp.sweep_id} did not complete.",
            "see `finetune runs show RUN`, then run the sweep again with --retry-failed.",
        )
