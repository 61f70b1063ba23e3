"""Shared rendering helpers for the CLI: progress bars, JSON output, messages."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

_QUIET = {"on": False}  # `finetune --quiet`: no live progress, no per-epoch lines


def set_quiet(value: bool) -> None:
    _QUIET["on"] = value


def is_quiet() -> bool:
    """Whether `finetune --quiet` asked for results and errors only."""
    return _QUIET["on"]


_LABELS = {
    "download": "Downloading",
    "verify": "Verifying",
    "extract": "Extracting",
    "encode": "Encoding images",
}


@contextmanager
def progress_bars(enabled: bool = True) -> Iterator[Callable[[str, int], Callable[[int], None]]]:
    """Yield ``start(stage, total) -> advance(n)``; bars go to stderr, and only on a terminal."""
    if not enabled or is_quiet() or not sys.stderr.isatty():
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
    """Print rows as a table that fits the terminal; the first row is the header."""
    rich_table([str(c) for c in rows[0]], [[str(c) for c in r] for r in rows[1:]])


def rich_table(headers: list[str], rows: list[list[str]]) -> None:
    """Print a table on stdout that fits the terminal's width (COLUMNS when not a terminal;
    80 by default): headers wrap, wide tables split into blocks, numbers never break."""
    from finetune.report.text import table_text

    typer.echo(table_text(headers, rows))


def check_format(fmt: str, choices: tuple[str, ...]) -> str:
    """``fmt`` in lower case if it is one of ``choices``, else a UsageError."""
    from finetune.errors import UsageError, did_you_mean

    low = fmt.strip().lower()
    if low not in choices:
        raise UsageError(
            f'unknown format "{fmt}".{did_you_mean(low, choices)}',
            f"use {', '.join(choices[:-1])} or {choices[-1]} (any case).",
        )
    return low
