"""`finetune sweep`: one recipe over a grid of instances, batch sizes and engines."""

from __future__ import annotations

import typer

from finetune.cli._options import Dataset, Json, Recipe
from finetune.cli._render import echo_json, emit_table, output_format
from finetune.errors import FinetuneError
from finetune.runs.ledger import open_default
from finetune.sweep import cells
from finetune.sweep.execution import run_sweep


def sweep(
    recipe: Recipe,
    overrides: list[str] = typer.Argument(
        None, help="Recipe overrides for every cell, as key=value (e.g. epochs=2)."
    ),
    dataset: Dataset = None,
    grid: list[str] = typer.Option(
        None,
        help="KEY=V1,V2 (repeat): instance, count, cpus (local), batch_per_device, engine, or any "
        "recipe key. Every combination is one run.",
    ),
    backend: str = typer.Option("local", help="Where every cell runs: local, sagemaker or ec2."),
    instance: str = typer.Option(None, help="Cloud: the instance type when the grid has none."),
    region: str = typer.Option(None, help="Cloud: the region to price (default: us-east-1)."),
    spot: bool = typer.Option(False, "--spot", help="Cloud: spot capacity for every cell."),
    max_eur: float = typer.Option(
        None, help="Refuse to start when the total estimate exceeds this many euros."
    ),
    parallel: int = typer.Option(
        1, min=1, help="Runs at a time on the cloud (always 1 on the local backend)."
    ),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="Run failed, stopped or interrupted cells again."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Show the cells and estimates; run nothing."
    ),
    fmt: str = typer.Option(
        "table", "--format", help="table, json (the plan with --dry-run, else the result) or csv."
    ),
    as_json: Json = False,
) -> None:
    """Run RECIPE once per grid cell, with batch and learning rate derived per cell (linear
    scaling rule) and a euro estimate each; refuse above --max-eur. Running the same sweep
    again resumes it: finished cells are not run again. Report: cost-report --sweep ID."""
    fmt = output_format(fmt, as_json)
    as_json = fmt == "json"
    sp = cells.plan_sweep(
        recipe, dataset, backend, grid or [], overrides=overrides or (), instance=instance,
        region=region, spot=spot,
    )  # fmt: skip
    if as_json and dry_run:
        echo_json(cells.as_dict(sp))
    elif fmt == "csv":
        emit_table(fmt, cells.HEADERS, cells.table_rows(sp), cells.as_dict(sp)["cells"])
    elif not as_json:
        typer.echo(f"Sweep {sp.sweep_id}: {len(sp.cells)} run(s) of {sp.recipe} on {backend}")
        emit_table(fmt, cells.HEADERS, cells.table_rows(sp), [])
        total = (
            "unknown (a cell has no estimate)" if sp.total_eur is None else f"{sp.total_eur:.2f}"
        )
        typer.echo(f"Total estimate: {total} EUR")
    sp.check_budget(max_eur)
    if dry_run:
        return
    _run(sp, parallel, retry_failed, as_json)


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
