"""`finetune launch`: recipe + dataset -> plan -> a run on a backend."""

from __future__ import annotations

from typing import Annotated

import typer

from finetune import service
from finetune.cli._follow import follow_run, hooks, print_plan
from finetune.cli._launch_request import LaunchFlags
from finetune.cli._options import DryRun, Format, Help, Json, Overrides, typed_flags
from finetune.cli._records import record_csv
from finetune.cli._render import output_format
from finetune.runs.ledger import open_default

OptionalRecipe = Annotated[
    str | None,
    typer.Argument(help="Recipe name (see `finetune recipes list`) or path to a recipe YAML."),
]
LaunchOverrides = Annotated[
    Overrides, Help("Recipe overrides as key=value, e.g. epochs=2 optimizer.lr_per_device=0.002.")
]
LaunchDryRun = Annotated[DryRun, Help("Show the plan and exit; run nothing.")]
Verbose = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="With the plan: the estimate's every figure and source."),
]
Detach = Annotated[bool, typer.Option("--detach", help="Start the run and return at once.")]
Resume = Annotated[str | None, typer.Option(help="Resume this run (id) from its last checkpoint.")]
LaunchFormat = Annotated[
    Format, Help("table, json (the plan / final run) or csv (--dry-run's plan).")
]


@typed_flags
def launch(
    recipe: OptionalRecipe = None,
    overrides: LaunchOverrides = None,
    *,
    flags: LaunchFlags,
    dry_run: LaunchDryRun = False,
    verbose: Verbose = False,
    detach: Detach = False,
    resume: Resume = None,
    fmt: LaunchFormat = "table",
    as_json: Json = False,
) -> None:
    """Fine-tune RECIPE on a prepared dataset. Batch and learning rate scale linearly with the
    number of devices; the derived values are shown before anything runs. Each backend takes
    the options marked with its name; --dry-run runs every check a launch runs and creates
    nothing."""
    fmt = output_format(fmt, as_json)
    as_json = fmt == "json"
    if resume:
        _resume(resume, detach, as_json)
        return
    if not recipe:
        raise typer.BadParameter("give a RECIPE (or --resume RUN)", param_hint="RECIPE")
    planned = service.plan_launch(flags.request(recipe, overrides), hooks())
    if dry_run and fmt == "csv":
        typer.echo(record_csv(planned.preflight.plan.model_dump(mode="json")), nl=False)
    elif dry_run or not as_json:
        print_plan(planned.preflight, as_json, verbose)
    planned.preflight.raise_if_failed()  # after the plan: what would stop the launch
    if dry_run:
        return
    service.fetch_weights(planned.weights, hooks())  # before the run exists: nothing half-made
    _start(planned, detach, as_json)


def _resume(run_id: str, detach: bool, as_json: bool) -> None:
    """Resume run ``run_id`` from its last checkpoint, then follow it."""
    with open_default() as ledger:
        run, be = service.resume(ledger, run_id, hooks())
        typer.echo(
            f"Resumed {run.id}: it continues from its newest complete checkpoint; its log "
            "says which one (or that none could be used, and it starts over).",
            err=True,
        )
        follow_run(run, be, ledger, detach, as_json)


def _start(planned, detach: bool, as_json: bool) -> None:
    """Record and start the planned run, then follow it (or return at once: --detach)."""
    with open_default() as ledger:
        run = service.launch(planned.plan, planned.backend, ledger)
        be = planned.backend
        typer.echo(f"Run {run.id} started ({be.name}); logs: finetune runs logs {run.id}", err=True)
        follow_run(run, be, ledger, detach, as_json)
