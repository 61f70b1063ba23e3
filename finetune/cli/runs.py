"""`finetune runs`: list, show, logs and stop runs recorded in the ledger."""

from __future__ import annotations

import typer

app = typer.Typer(help="Runs recorded in the ledger: list, show, logs, stop.", no_args_is_help=True)

_JSON = typer.Option(False, "--json", help="Print JSON instead of text.")


def render_run(run, ledger) -> None:
    from finetune.runs.views import final_facts, show_lines

    for line in show_lines(run, ledger.epochs(run.id), final_facts(ledger.events(run.id))):
        typer.echo(line)


@app.command("list")
def list_runs(
    recipe: str = typer.Option(None, help="Only runs of this recipe."),
    refresh: bool = typer.Option(
        False, "--refresh", help="Ask the cloud where live cloud runs are (needs AWS)."
    ),
    as_json: bool = _JSON,
) -> None:
    """List runs, oldest first, as the ledger has them (local runs are checked; cloud runs
    only with --refresh, so a listing works offline)."""
    from finetune import service
    from finetune.cli._render import echo_json, table
    from finetune.runs.ledger import open_default
    from finetune.runs.views import list_rows, run_dict

    with open_default() as ledger:
        runs = service.listing(ledger, recipe=recipe, refresh=refresh)
        data = [run_dict(r, ledger.epochs(r.id)) for r in runs]
    if as_json:
        echo_json(data)
        return
    if not runs:
        typer.echo("No runs yet. Start one with `finetune launch RECIPE --dataset DIR`.")
        return
    table(list_rows(runs, {d["id"]: d["best_val_acc"] for d in data}))


@app.command("show")
def show(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."), as_json: bool = _JSON
) -> None:
    """Show one run: plan, status, throughput, per-epoch metrics, which epoch the model
    comes from, test accuracy and the weakest classes."""
    from finetune import service
    from finetune.cli._render import echo_json
    from finetune.runs.ledger import open_default
    from finetune.runs.views import final_facts, run_dict

    with open_default() as ledger:
        run = service.refreshed(ledger, run_id)
        if as_json:
            final = final_facts(ledger.events(run.id))
            echo_json(run_dict(run, ledger.epochs(run.id), final))
        else:
            render_run(run, ledger)


@app.command("logs")
def logs(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the run ends."),
) -> None:
    """Print the trainer's log of a run."""
    from finetune import service
    from finetune.backends import get_backend
    from finetune.runs.ledger import open_default

    with open_default() as ledger:
        run = ledger.get(run_id)
        be = get_backend(run.backend)
        if follow:
            service.follow(run, be, ledger, lambda r, s, e, text: typer.echo(text, nl=False))
        else:
            typer.echo(be.logs(run, 0)[0], nl=False)


@app.command("stop")
def stop(run_id: str = typer.Argument(..., help="Run id (or a unique prefix).")) -> None:
    """Stop a run: it checkpoints and ends; `finetune launch --resume RUN` continues it."""
    from finetune import service
    from finetune.runs.ledger import open_default

    with open_default() as ledger:
        run = service.stop(ledger, run_id)
    if run.status == "stopping":
        typer.echo(f"Asked {run.id} to stop; it saves a checkpoint first.")
    else:
        typer.echo(f"{run.id} is {run.status}: {run.exit_reason or 'nothing was running'}.")
