"""`finetune runs`: list, show, logs and stop runs recorded in the ledger."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from finetune import service
from finetune.backends import get_backend
from finetune.cli._options import (
    DryRun,
    Format,
    Help,
    Json,
    OlderThan,
    RecipeFilter,
    RunId,
    typed_flags,
)
from finetune.cli._progress import EpochDisplay
from finetune.cli._records import record_csv
from finetune.cli._render import echo_json, emit_table, is_quiet, output_format
from finetune.runs.ledger import open_default
from finetune.runs.views import (
    LIST_FIELDS,
    SPEND_HEADER,
    final_facts,
    list_rows,
    remarks,
    run_dict,
    show_lines,
    spend_cell,
)
from finetune.service.logtext import for_people, log_for_people, printable, remote
from finetune.service.removal import prune as prune_runs
from finetune.service.removal import remove
from finetune.service.tensorboard import locate
from finetune.units.durations import parse_duration

app = typer.Typer(
    help="Runs recorded in the ledger: list, show, logs, stop, rm, prune.", no_args_is_help=True
)


def note_read_only(ledger) -> None:
    """Say (on stderr) that the ledger was only read, and why, when its disk refused more."""
    if ledger.read_only:
        typer.echo(
            f"Note: {ledger.read_only}. The ledger was read without writing to it "
            "(live runs are shown as last recorded).",
            err=True,
        )


def render_run(run, ledger) -> None:
    epochs = ledger.epochs(run.id, run.problems)  # a damaged epoch is named, not fatal
    # a ledger may hold remote strings stored raw by older versions: shown inert all the same
    for line in show_lines(run, epochs, final_facts(ledger.events(run.id))):
        typer.echo(printable(line))


@app.command("list")
def list_runs(
    recipe: RecipeFilter = None,
    refresh: bool = typer.Option(
        False, "--refresh", help="Ask the cloud where live cloud runs are (needs AWS)."
    ),
    fmt: Format = "table",
    as_json: Json = False,
) -> None:
    """List runs, oldest first, as the ledger has them (local runs are checked; cloud runs
    only with --refresh, so a listing works offline)."""
    fmt = output_format(fmt, as_json)
    with open_default(read_only_ok=not refresh) as ledger:
        note_read_only(ledger)
        runs = service.listing(ledger, recipe=recipe, refresh=refresh)
        # one damaged row is listed with its problem (below the table), never fatal
        data = [run_dict(r, ledger.epochs(r.id, r.problems)) for r in runs]
    if not runs and fmt == "table":
        typer.echo("No runs yet. Start one with `finetune launch RECIPE --dataset DIR`.")
        return
    cells = {d["id"]: spend_cell(d) for d in data}
    head, *rows = list_rows(runs, {d["id"]: d["best_val_acc"] for d in data}, cells)
    # the table leaves out what its rows already say; CSV, as JSON, keeps every field. Below
    # 120 columns the euros wrap at their space and the recipe is cut, so it stays one table
    emit_table(fmt, list(head), [list(r) for r in rows], data, list(LIST_FIELDS), ("DEVICES",),
               wrap=(SPEND_HEADER,), cut=("RECIPE",))  # fmt: skip
    if fmt == "table":
        for run, d in zip(runs, data, strict=True):
            for line in remarks(run, d):
                typer.echo(printable(line))


@app.command("show")
@typed_flags
def show(
    run_id: RunId,
    fmt: Annotated[Format, Help("table (text), json or csv (key,value).")] = "table",
    as_json: Json = False,
    tensorboard: bool = typer.Option(
        False,
        "--tensorboard",
        help="Only say where the run's TensorBoard files are and the command that opens them.",
    ),
) -> None:
    """Show one run: plan, status, throughput, per-epoch metrics, which epoch the model
    comes from, test accuracy and the weakest classes."""
    if tensorboard:
        _show_tensorboard(run_id)
        return
    fmt = output_format(fmt, as_json)
    with open_default(read_only_ok=True) as ledger:
        note_read_only(ledger)
        run = service.refreshed(ledger, run_id)
        if fmt == "table":
            render_run(run, ledger)
            return
        epochs = ledger.epochs(run.id, run.problems)
        record = run_dict(run, epochs, final_facts(ledger.events(run.id)))
    if fmt == "json":
        echo_json(record)
    else:
        typer.echo(record_csv(record), nl=False)


def _show_tensorboard(run_id: str) -> None:
    with open_default(read_only_ok=True) as ledger:
        run = ledger.get(run_id)
    place = locate(run, get_backend(run.backend))
    kind = "S3 prefix" if place.in_s3 else "folder"
    typer.echo(f"TensorBoard files of {run.id} ({kind}): {place.location}")
    typer.echo(f"Open them: {place.command}")


@app.command("logs")
def logs(
    run_id: RunId,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the run ends."),
    raw: bool = typer.Option(
        False,
        "--raw",
        help="The log as the trainer wrote it: its finetune-* key=value lines too, with the "
        "metrics contract's epochs counted from 0 (what scripts and metric regexes parse).",
    ),
) -> None:
    """Print the trainer's log of a run, epochs counted from 1 as `runs show` counts them:
    each epoch's metrics line as one readable line, no progress lines (--raw: all of it, as
    written). With --follow on a terminal, the progress lines become a live bar per epoch
    (steps, images/s, loss, time left)."""
    shown = (lambda text: text) if raw else log_for_people
    with open_default() as ledger:
        run = ledger.get(run_id)
        be = get_backend(run.backend)
        if not follow:
            typer.echo(shown(service.read_logs(run, be, 0)[0]), nl=False)
            return
        if raw or not sys.stderr.isatty():  # a pipe or a file: whole lines as they come
            service.follow(run, be, ledger, _whole_lines(shown))
            return
        _follow_with_bars(run, be, ledger)


def _whole_lines(shown):
    """A follow callback that prints ``shown`` of the log's whole lines as they arrive (a
    line cut between two reads waits for its end; the last one is printed when the run
    ends)."""
    pending = {"text": ""}

    def on_update(run, status, epochs, text):
        cut = (pending["text"] + (text or "")).rpartition("\n")
        pending["text"] = cut[2]
        if cut[0] or cut[1]:
            typer.echo(shown(cut[0] + cut[1]), nl=False)
        if status.final and cut[2]:
            typer.echo(shown(cut[2] + "\n"), nl=False)
            pending["text"] = ""

    return on_update


def _follow_with_bars(run, backend, ledger) -> None:
    display = EpochDisplay(run.plan.get("hyperparameters", {}).get("epochs"), quiet=is_quiet())

    def on_update(r, status, epochs, text):
        for e in epochs:
            display.epoch_done(e.epoch)
        for line in display.feed(text):
            shown = for_people(line)  # epochs counted from 1
            if shown is not None:
                display.echo(shown)

    display.start()
    try:
        service.follow(run, backend, ledger, on_update)
    finally:
        display.stop()


@app.command("stop")
def stop(run_id: RunId) -> None:
    """Stop a run: it checkpoints and ends; `finetune launch --resume RUN` continues it."""
    with open_default() as ledger:
        run = service.stop(ledger, run_id)
    if run.status == "stopping":
        typer.echo(f"Asked {run.id} to stop; it saves a checkpoint first.")
    else:
        why = remote(run.exit_reason) or "nothing was running"
        typer.echo(f"{run.id} is {run.status}: {why}.")


RemovalDryRun = Annotated[DryRun, Help("Say what would be removed; remove nothing.")]


@app.command("rm")
@typed_flags
def rm(
    run_ids: list[str] = typer.Argument(..., help="Run ids (or unique prefixes)."),
    dry_run: RemovalDryRun = False,
) -> None:
    """Remove runs from this machine: their folder under the data directory and their
    ledger rows. Nothing in the cloud is touched; a run still running is refused."""
    with open_default() as ledger:
        _say_removed(remove(ledger, run_ids, dry_run), dry_run)


@app.command("prune")
@typed_flags
def prune(
    older_than: Annotated[
        OlderThan, Help("Remove runs created longer ago than this, e.g. 30d, 12h.")
    ],
    dry_run: RemovalDryRun = False,
) -> None:
    """Remove every ended run older than --older-than from this machine (folders and
    ledger rows); runs still running are kept and listed. Nothing in the cloud is touched."""
    age = parse_duration(older_than, "--older-than")
    with open_default() as ledger:
        _say_removed(prune_runs(ledger, age, dry_run), dry_run)


def _say_removed(result, dry_run: bool) -> None:
    verb = "Would remove" if dry_run else "Removed"
    size = f"{result.freed_bytes / 1e6:,.1f} MB"
    ids = ", ".join(result.removed) or "nothing"
    typer.echo(f"{verb} {len(result.removed)} run(s) ({size} on disk): {ids}")
    for run_id, why in result.kept.items():
        typer.echo(printable(f"Kept {run_id}: {why}."))
    for folder in result.folders_left:
        typer.echo(f"Left {folder} in place: it is not under finetune's runs folder.")
