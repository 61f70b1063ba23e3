"""Shared rendering helpers for the CLI: progress bars, JSON output, messages. The root group
imports this module for --quiet: it stays light (rich is imported when a bar is shown)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

from finetune.errors import UsageError, did_you_mean
from finetune.report.text import key_of, rows_to_csv, table_text

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


def rich_table(
    headers: list[str], rows: list[list[str]], text: tuple = (), wrap: tuple = (), cut: tuple = ()
) -> None:
    """Print a table on stdout that fits the terminal's width (COLUMNS when not a terminal;
    80 by default): headers wrap, wide tables split into blocks, numbers never break. The
    columns headed in ``text`` are text (left, wrapping at spaces) even where their cells
    start with a digit ('16 gpu ml.p4d.24xlarge', '028.camel'); ``wrap`` and ``cut``: as
    report.text.table_text takes them."""
    typer.echo(table_text(headers, rows, text=text, wrap=wrap, cut=cut))


def check_format(fmt: str, choices: tuple[str, ...]) -> str:
    """``fmt`` in lower case if it is one of ``choices``, else a UsageError."""
    low = fmt.strip().lower()
    if low not in choices:
        raise UsageError(
            f'unknown format "{fmt}".{did_you_mean(low, choices)}',
            f"use {', '.join(choices[:-1])} or {choices[-1]} (any case).",
        )
    return low


# One output convention: every command that prints a table or a record takes
# --format table|json|csv; JSON keys are the table's headers in snake_case (report.text's
# key_of and header_of: one rule for every table).
FORMATS = ("table", "json", "csv")


def output_format(fmt: str, as_json: bool = False, choices: tuple[str, ...] = FORMATS) -> str:
    """The format asked for: ``--json`` (deprecated) means json, else ``fmt`` checked."""
    return "json" if as_json else check_format(fmt, choices)


def emit_table(
    fmt: str,
    headers: list[str],
    cells: list[list[str]],
    records: list[dict],
    fields: list[str] | None = None,
    text: tuple = (),
    wrap: tuple = (),
    cut: tuple = (),
) -> None:
    """Print rows as a table (``cells``, for people), JSON (``records``) or CSV (the records'
    values under the headers' keys, or under ``fields`` where a table shows fewer columns
    than the data has). Each record holds at least ``key_of`` of every header."""
    if fmt == "json":
        echo_json(records)
    elif fmt == "csv":
        keys = list(fields) if fields else [key_of(h) for h in headers]
        rows = [["" if r.get(k) is None else r.get(k) for k in keys] for r in records]
        typer.echo(rows_to_csv(keys, rows), nl=False)
    else:
        rich_table(headers, cells, text, wrap, cut)
