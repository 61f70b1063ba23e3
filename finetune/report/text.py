"""Plain-text tables, CSV and Markdown, and the number formats reports use.

Plain text rather than a terminal widget: the output is the same in a pipe, a log and a
test, and columns never wrap.
"""

from __future__ import annotations

from finetune.catalog._files import rows_to_csv as csv_text  # one CSV dialect everywhere

__all__ = [
    "csv_text",
    "duration",
    "euros",
    "markdown_text",
    "number",
    "percent",
    "table_text",
]

NA = "-"


def table_text(headers: list[str], rows: list[list[str]]) -> str:
    """Aligned columns: text left, numbers (cells starting with a digit or sign) right."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        out = [
            c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(cells, widths, strict=True)
        ]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def _numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or cell[0] in "+-.~") and cell != NA


def markdown_text(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def line(cells):
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headers), line(["---"] * len(headers)), *(line(r) for r in rows)])


def duration(seconds: float | None) -> str:
    """'1h 02m', '10m 05s', '42s'."""
    if seconds is None:
        return NA
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


def number(value: float | None, fmt: str = ".1f", suffix: str = "") -> str:
    """``value`` formatted with ``fmt`` and ``suffix``; '-' for None."""
    return NA if value is None else f"{value:{fmt}}{suffix}"


def percent(value: float | None) -> str:
    """0.9375 -> '93.8 %'; '-' for None."""
    return NA if value is None else f"{value * 100:.1f} %"


def euros(value: float | None) -> str:
    """Two decimals; '-' for None."""
    return NA if value is None else f"{value:.2f}"
