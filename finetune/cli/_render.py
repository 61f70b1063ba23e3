"""Shared rendering helpers for the CLI: progress bars, JSON output, messages."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

_LABELS = {
    "download": "Downloading",
    "verify": "Verifying",
    "extract": "Extracting",
    "encode": "Encoding images",
}


@contextmanager
def progress_bars(enabled: bool = True) -> Iterator[Callable[[str, int], Callable[[int], None]]]:
    """Yield ``start(stage, total) -> advance(n)``; bars go to stderr, and only on a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield lambda stage, total: lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = [
        TextColumn("{task.description:<16}"),
        BarColumn(),
        TaskProgressColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:

        def start(stage: str, total: int) -> Callable[[int], None]:
            task = bar.add_task(_LABELS.get(stage, stage), total=total or None)
            return lambda n: bar.advance(task, n)

        yield start


def echo_json(obj) -> None:
    typer.echo(json.dumps(obj, indent=2, default=str))


def info(message: str) -> None:
    """A human-oriented line on stderr (stdout stays clean for --json)."""
    typer.echo(message, err=True)


def table(rows: list[tuple[str, ...]]) -> None:
    """Print rows as aligned columns; the first row is the header."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
