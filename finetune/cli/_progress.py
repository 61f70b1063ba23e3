"""Live progress of a run in the terminal: the trainer's progress lines (every few
seconds, finetune.contracts.metrics.BatchProgress) become one bar per epoch with steps, images/s,
loss and the time left; without a terminal they become a plain line now and then;
--quiet shows none."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

import typer

from finetune.contracts.metrics import BatchProgress, parse_progress

if TYPE_CHECKING:  # rich is imported when a bar is shown
    from rich.progress import Progress, TaskID

PLAIN_EVERY_S = 10.0  # without a terminal: at most one progress line this often


class EpochDisplay:
    """Feed it log text; it shows where the current epoch stands."""

    def __init__(self, epochs: int | None, quiet: bool = False, console=None) -> None:
        self.epochs = epochs
        self.quiet = quiet
        self.live = console is not None or sys.stderr.isatty()
        self._console = console
        self._bar: Progress | None = None
        self._tasks: dict[int, TaskID] = {}
        self._last_plain = 0.0

    def start(self) -> EpochDisplay:
        if self.live and not self.quiet and self._bar is None:
            self._bar, self._tasks = _bar(self._console), {}
            self._bar.start()
        return self

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def feed(self, text: str) -> list[str]:
        """Show the progress lines of ``text``; returns its other lines."""
        rest = []
        for line in text.splitlines():
            p = parse_progress(line)
            if p is None:
                rest.append(line)
            elif not self.quiet:
                self.update(p)
        return rest

    def update(self, p: BatchProgress) -> None:
        """The bar of epoch ``p.epoch`` (or a plain line) at ``p``."""
        fields: dict[str, Any] = {"epoch": self._label(p.epoch), **_figures(p)}  # task fields
        if self._bar is None:
            if time.monotonic() - self._last_plain >= PLAIN_EVERY_S or p.batch == p.steps:
                typer.echo(_plain(p, fields), err=True)
                self._last_plain = time.monotonic()
            return
        if p.epoch not in self._tasks:
            self._tasks[p.epoch] = self._bar.add_task("", total=p.steps, **fields)
        self._bar.update(self._tasks[p.epoch], completed=p.batch, total=p.steps, **fields)

    def epoch_done(self, epoch: int) -> None:
        """A finished epoch's bar stays, full."""
        task = self._tasks.get(epoch)
        if self._bar is not None and task is not None:
            total = self._bar.tasks[task].total
            self._bar.update(task, completed=total, eta="done")

    def echo(self, line: str) -> None:
        """A line above the bars (or on stderr)."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            typer.echo(line, err=True)

    def _label(self, epoch: int) -> str:
        return f"epoch {epoch + 1}" + (f"/{self.epochs}" if self.epochs else "")


def _figures(p: BatchProgress) -> dict[str, str]:
    loss = "-" if p.train_loss is None else f"{p.train_loss:.3f}"
    eta = p.eta_seconds
    left = "-" if eta is None else f"{int(eta) // 60}:{int(eta) % 60:02d}"
    return {"rate": f"{p.images_per_sec:,.1f}", "loss": loss, "eta": left}


def _plain(p: BatchProgress, f: dict[str, str]) -> str:
    return (
        f"  {f['epoch']}: {p.batch}/{p.steps} steps, {f['rate']} img/s, loss {f['loss']}, "
        f"{f['eta']} left"
    )


def _bar(console=None) -> Progress:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = [
        TextColumn("{task.fields[epoch]}"),
        BarColumn(bar_width=None),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} img/s"),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("{task.fields[eta]} left"),
    ]
    return Progress(*columns, console=console or Console(stderr=True), expand=False)


@contextlib.contextmanager
def working(message: str):
    """A spinner on stderr while a long step runs (loading an engine, scoring, exporting),
    then the seconds it took (rich's status line); only on a terminal."""
    if not sys.stderr.isatty():  # a log or a pipe: nothing to animate, nothing added
        yield
        return
    from rich.console import Console

    start = time.monotonic()
    console = Console(stderr=True)
    with console.status(message):
        yield
    console.print(f"{message}: done in {time.monotonic() - start:.0f} s")
