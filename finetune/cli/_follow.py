"""Following a run in the terminal: epoch bar, images/s, accuracy; Ctrl-C asks what to do."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import typer


def print_plan(plan) -> None:
    typer.echo("Plan:")
    for line in plan.summary_lines():
        typer.echo(f"  {line}")


def epoch_line(e) -> str:
    val = f" val_acc {e.val_acc:.3f}" if e.val_acc is not None else ""
    return (
        f"  epoch {e.epoch + 1}: {e.samples_per_sec:,.1f} img/s, {e.epoch_seconds:.1f} s, "
        f"loss {e.train_loss:.3f}, train_acc {e.train_acc:.3f}{val}, lr {e.lr:.3g}"
    )


def follow_run(run, backend, ledger, detach: bool, as_json: bool) -> None:
    """Follow until the run ends (or return at once with --detach), then summarise: a live
    bar per epoch on a terminal, plain lines otherwise, none with `finetune --quiet`."""
    from finetune.cli._progress import EpochDisplay
    from finetune.cli._render import is_quiet
    from finetune.runs import service

    if detach:
        typer.echo(f"Detached. Follow with: finetune runs show {run.id}", err=True)
        return
    shown = {"epochs": 0}
    total = run.plan["hyperparameters"]["epochs"]
    display = EpochDisplay(total, quiet=is_quiet())

    def on_update(run, status, epochs, text):
        rest = display.feed(text or "")
        for e in epochs[shown["epochs"] :]:
            display.epoch_done(e.epoch)
            if not display.quiet:
                display.echo(f"{epoch_line(e)}  [{e.epoch + 1}/{total}]")
        shown["epochs"] = max(shown["epochs"], len(epochs))
        if status.detail and status.detail != shown.get("detail"):  # e.g. EC2 img/s, relaunch
            display.echo(f"  {status.state}: {status.detail}")
            shown["detail"] = status.detail
        if rest and getattr(backend, "stream_logs", False) and not display.quiet:
            _echo_log(rest, display.echo)  # e.g. SageMaker's CloudWatch log

    # a cloud backend polls a rate-limited API: it says how often (SageMaker: every 20 s)
    every = service.Follow(poll_seconds=getattr(backend, "poll_seconds", 1.0))
    try:
        with _showing(display):
            run = service.follow(run, backend, ledger, on_update, every)
    except KeyboardInterrupt:
        if _ask_stop(run):
            backend.stop(run)
            typer.echo(
                f"Stopping {run.id}: it checkpoints, then ends. Resume with "
                f"`finetune launch --resume {run.id}`.",
                err=True,
            )
            with _showing(display):
                run = service.follow(run, backend, ledger, on_update, every)
        else:
            typer.echo(
                f"Detached; {run.id} keeps running. Stop it with `finetune runs stop {run.id}`.",
                err=True,
            )
            return
    _finish(run, ledger, as_json)


def _echo_log(lines: list[str], echo) -> None:
    """The trainer's log lines, indented; its metric lines are shown as epoch lines instead
    (and its progress lines as the bar)."""
    from finetune.metrics import LOG_PREFIX

    for line in lines:
        if LOG_PREFIX not in line:
            echo(f"  | {line}")


@contextmanager
def _showing(display):
    """The live display while following; stopped before any question is asked."""
    display.start()
    try:
        yield display
    finally:
        display.stop()


def _ask_stop(run) -> bool:
    if not sys.stdin.isatty():
        return False
    answer = typer.prompt(
        f"\nStop run {run.id} (s) or detach and leave it running (d)?", default="d"
    )
    return answer.strip().lower().startswith("s")


def _finish(run, ledger, as_json: bool) -> None:
    from finetune.cli.runs import render_run

    if as_json:
        from finetune.cli._render import echo_json
        from finetune.runs.views import run_dict

        echo_json(run_dict(run, ledger.epochs(run.id)))
    else:
        render_run(run, ledger)
    if run.status != "completed":
        raise typer.Exit(1)
