"""Following a run in the terminal: epoch bar, images/s, accuracy; Ctrl-C asks what to do."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from functools import partial

import typer

from finetune import service
from finetune.backends.base import Feature, Hooks
from finetune.cli._ctrl_c import EXIT_CTRL_C, ctrl_c_taken
from finetune.cli._plan_view import aligned, summary_lines, warnings
from finetune.cli._progress import EpochDisplay
from finetune.cli._render import echo_json, is_quiet
from finetune.cli.runs import render_run
from finetune.contracts.metrics import LOG_PREFIX
from finetune.report.text import terminal_width, wrap_text
from finetune.runs.views import run_dict, spent
from finetune.service.logtext import epoch_text, for_people, remote


def print_plan(preflight, as_json: bool = False, verbose: bool = False) -> None:
    """What to read first (warnings), the plan, then what the backend will do with it (where,
    how long, at what cost); ``verbose``: the estimate's every figure and source."""
    if as_json:
        echo_json(preflight.plan.model_dump(mode="json"))
        return
    room = terminal_width() - 2  # the rows are indented by two
    for warning in warnings(preflight.plan):
        typer.echo(wrap_text(f"Warning: {warning}"))
    typer.echo("Plan:")
    for line in summary_lines(preflight.plan, room, verbose=verbose):
        typer.echo(f"  {line}")
    typer.echo(f"{preflight.title}:")
    for line in aligned(preflight.rows, room):
        typer.echo(f"  {line}")


def hooks():
    """Backend hooks for a terminal: messages on stderr, a progress bar for uploads there."""
    return Hooks(
        notify=lambda message: typer.echo(message, err=True),
        progress=_progress if sys.stderr.isatty() else None,
    )


def _progress(label: str, total: int):
    """A rich bar for ``total`` bytes that closes itself when they are done."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    bar = Progress(
        TextColumn(f"{label:<16}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=Console(stderr=True),
    )
    task = bar.add_task(label, total=total)
    bar.start()
    done = [0]

    def advance(n: int) -> None:
        done[0] += n
        bar.advance(task, n)
        if done[0] >= total:
            bar.stop()

    if total <= 0:
        bar.stop()
    return advance


def epoch_line(e) -> str:
    return f"  {epoch_text(e)}"


def follow_run(run, backend, ledger, detach: bool, as_json: bool) -> None:
    """Follow until the run ends (or return at once with --detach), then summarise: a live
    bar per epoch on a terminal, plain lines otherwise, none with `finetune --quiet`."""
    if detach:
        typer.echo(f"Detached. Follow with: finetune runs show {run.id}", err=True)
        return
    shown = {"epochs": 0}
    total = run.plan["hyperparameters"]["epochs"]
    display = EpochDisplay(total, quiet=is_quiet())

    def on_update(run, status, epochs, text):
        rest = display.feed(text or "")
        money = spent(run, epochs) if len(epochs) > shown["epochs"] else None
        for e in epochs[shown["epochs"] :]:
            display.epoch_done(e.epoch)
            if not display.quiet:
                cost = f"  {money.text()}" if money is not None and e is epochs[-1] else ""
                display.echo(f"{epoch_line(e)}  [{e.epoch + 1}/{total}]{cost}")
        shown["epochs"] = max(shown["epochs"], len(epochs))
        if status.detail and status.detail != shown.get("detail"):  # e.g. EC2 img/s, relaunch
            display.echo(f"  {status.state}: {remote(status.detail)}")  # from the cloud
            shown["detail"] = status.detail
        if rest and backend.stream_logs and not display.quiet:
            _echo_log(rest, display.echo)  # e.g. SageMaker's CloudWatch log

    with ctrl_c_taken() as presses:  # every press seen at once, any number of them
        follow = partial(_following, backend, ledger, on_update, display, presses)
        try:
            run = follow(run)
        except KeyboardInterrupt:
            run = _stop_or_leave(run, backend, presses, follow)
        _finish(run, ledger, as_json)


def _following(backend, ledger, on_update, display, presses, run):
    """service.follow with the live display, as often as the backend says (a cloud API is
    rate limited); a press ends the wait between two polls. The display is torn down after
    a press may raise (``following`` ends first), so a press never cuts its redraw short."""
    with _showing(display), presses.following():
        return service.follow(run, backend, ledger, on_update, service.Follow(wait=presses.wait))


def _stop_or_leave(run, backend, presses, follow):
    """After Ctrl-C: the run stopped and followed to its end, or the command ends saying how
    to stop the run that keeps running. Ctrl-C again at the question leaves it running (a
    press never stops a paid job unasked); again while it stops, ends the watching only."""
    answer = _ask_stop(run, presses) if backend.capabilities.supports(Feature.STOP) else "d"
    if answer != "s":
        typer.echo(
            f"Detached; {run.id} keeps running. Stop it with `finetune runs stop {run.id}`.",
            err=True,
        )
        raise typer.Exit(0 if answer == "d" else EXIT_CTRL_C)
    backend.stop(run)
    typer.echo(
        f"Stopping {run.id}: it checkpoints, then ends. Resume with "
        f"`finetune launch --resume {run.id}`.",
        err=True,
    )
    try:
        return follow(run)
    except KeyboardInterrupt:
        typer.echo(
            f"{run.id} is stopping without you watching: it checkpoints, then ends. See it "
            f"with `finetune runs show {run.id}`.",
            err=True,
        )
        raise typer.Exit(EXIT_CTRL_C) from None


def _echo_log(lines: list[str], echo) -> None:
    """The trainer's log lines, indented; its metric lines are shown as epoch lines instead
    (and its progress lines as the bar)."""
    for line in lines:
        shown = for_people(line) if LOG_PREFIX not in line else None
        if shown is not None:  # its other machine lines count epochs from 1, as people do
            echo(f"  | {shown}")


@contextmanager
def _showing(display):
    """The live display while following; stopped before any question is asked."""
    display.start()
    try:
        yield display
    finally:
        display.stop()


def _ask_stop(run, presses) -> str:
    """'s' (stop), 'd' (detach) or '' (Ctrl-C again, or no answer: detach, interrupted)."""
    if not sys.stdin.isatty():
        return "d"
    presses.forget()  # before the question shows: a press from then on answers it
    typer.echo(f"\nStop run {run.id} (s) or detach and leave it running (d)? [d]: ", nl=False)
    try:
        answer = presses.read_line().strip() or "d"
    except (KeyboardInterrupt, EOFError):
        typer.echo("", err=True)
        return ""
    return "s" if answer.lower().startswith("s") else "d"


def _finish(run, ledger, as_json: bool) -> None:
    if as_json:
        echo_json(run_dict(run, ledger.epochs(run.id)))
    else:
        render_run(run, ledger)
    if run.status != "completed":
        raise typer.Exit(1)
