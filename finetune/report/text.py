"""Text tables that fit the terminal, CSV and Markdown, and the number formats reports use.

Tables are drawn by rich at the terminal's width (COLUMNS, else 80 when not a terminal).
A table wider than that first wraps its headers at spaces; if it still does not fit, its
columns are split into blocks that each repeat the first (key) column, so a number is never
broken across lines or cut off.
"""

from __future__ import annotations

from finetune.catalog._files import rows_to_csv as data_csv  # one CSV dialect everywhere
from finetune.textsafe import cell, csv_cell

__all__ = [
    "duration",
    "euros",
    "fit",
    "header_of",
    "key_of",
    "markdown_text",
    "number",
    "percent",
    "rows_to_csv",
    "table_text",
    "terminal_width",
    "wrap_text",
]

NA = "-"

# One vocabulary for tables and records: a column's header is its JSON/CSV key with "_" shown
# as " " (these words in capitals); the key is the header's words in lower case joined by "_".
# Long headers wrap at their spaces (table_text), so the words need no abbreviations.
_CAPITALS = {"eur": "EUR", "usd": "USD", "gpu": "GPU", "gib": "GiB", "tflops": "TFLOPS",
             "vcpus": "vCPUs", "id": "ID"}  # fmt: skip


def header_of(key: str) -> str:
    """The table header of a JSON/CSV field: ``eur_per_epoch`` -> ``EUR per epoch``."""
    return " ".join(_CAPITALS.get(w, w) for w in key.split("_"))


def key_of(header: str) -> str:
    """The JSON/CSV field of a table header (the inverse of header_of, and any header's
    words): ``EUR per epoch`` -> ``eur_per_epoch``, ``BEST VAL ACC`` -> ``best_val_acc``."""
    import re

    return "_".join(re.findall(r"[a-z0-9]+", header.lower()))


GAP = 2  # between columns: one of padding, one of the (blank) divider


def terminal_width() -> int:
    """Columns of the terminal (COLUMNS wins; 80 when there is none)."""
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def table_text(
    headers: list[str],
    rows: list[list[str]],
    width: int | None = None,
    text: tuple = (),
    wrap: tuple = (),
    cut: tuple = (),
) -> str:
    """Aligned columns within ``width`` (default: the terminal's): text left, numbers
    (cells starting with a digit or sign, unless their header is in ``text``) right. Before
    the columns split into blocks, those headed in ``wrap`` (numbers with a space between
    them, '75.03 (~674.69)') wrap at their spaces as text does, and those in ``cut`` (names
    whose whole text is in JSON and CSV) are cut to the room left, ending in "…". Every
    cell and header passes textsafe.cell: remote strings are shown inert."""
    width = max(width or terminal_width(), 20)
    headers = [cell(h) for h in headers]
    rows = [[cell(c) for c in r] for r in rows]
    numeric = [headers[i] not in text and all(_numeric(r[i]) or r[i] == NA for r in rows)
               for i in range(len(headers))]  # fmt: skip
    cells = [max([0] + [_cell_len(r[i]) for r in rows]) for i in range(len(headers))]
    widths = [max(c, _cell_len(h)) for c, h in zip(cells, headers, strict=True)]
    if _total(widths) > width:  # headers may wrap at spaces; cells keep their width
        widths = [max(c, _longest_word(h)) for c, h in zip(cells, headers, strict=True)]
    whole = widths
    if _total(widths) > width:  # then text (not numbers) wraps at spaces
        fixed = [n and h not in wrap for n, h in zip(numeric, headers, strict=True)]
        widths = _shrink_text(widths, headers, rows, fixed, width)
    if _total(widths) > width and cut:  # then names are cut, to keep one block
        widths, rows = _cut(widths, headers, rows, cut, width)
    blocks = [list(range(len(headers)))]
    if _total(widths) > width:  # blocks after all: cells whole, unless that takes more blocks
        shrunk = _cap_text(widths, numeric, width)
        widths = _cap_text(whole, numeric, width)
        blocks = _blocks(widths, width)
        if len(_blocks(shrunk, width)) < len(blocks):
            widths, blocks = shrunk, _blocks(shrunk, width)
    parts = [_render([headers[i] for i in b], [[r[i] for i in b] for r in rows],
                     [widths[i] for i in b], [numeric[i] for i in b], width)
             for b in blocks]  # fmt: skip
    return "\n\n".join(parts)


def rows_to_csv(header, rows) -> str:
    """CSV for people (a spreadsheet, a pipe) in the catalog's one dialect: every string cell
    through textsafe.csv_cell (no escapes; a formula-like cell starts with ')."""
    return data_csv([csv_cell(h) for h in header], [[csv_cell(v) for v in r] for r in rows])


def wrap_text(text: str, width: int | None = None) -> str:
    """A paragraph wrapped at spaces to ``width`` (default: the terminal's)."""
    import textwrap

    width = width or terminal_width()
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)


def _blocks(widths: list[int], width: int) -> list[list[int]]:
    """Column groups that fit ``width``, each starting with the key column 0."""
    blocks: list[list[int]] = []
    current = [0]
    for i in range(1, len(widths)):
        if len(current) > 1 and _total([widths[j] for j in [*current, i]]) > width:
            blocks.append(current)
            current = [0]
        current.append(i)
    return [*blocks, current]


def _shrink_text(widths, headers, rows, numeric, width: int) -> list[int]:
    """Narrow the widest text columns (never the key column 0) down to their longest word
    (at least 12) until the table fits or nothing more can give."""
    widths = list(widths)
    excess = _total(widths) - width
    text = [i for i in range(1, len(widths)) if not numeric[i]]
    for i in sorted(text, key=lambda i: -widths[i]):
        words = [_longest_word(r[i]) for r in rows] + [_longest_word(headers[i]), 12]
        cut = min(excess, widths[i] - max(words))
        if cut > 0:
            widths[i] -= cut
            excess -= cut
        if excess <= 0:
            break
    return widths


def _cut(widths, headers, rows, cut, width: int) -> tuple[list[int], list[list[str]]]:
    """The ``cut`` columns narrowed (to at least 12 and their header's longest word) so the
    table fits, their longer cells cut to the new width with "…" at the end; unchanged when
    even that would not make it one block (blocks then show the whole names)."""
    narrow, cells = list(widths), [list(r) for r in rows]
    for i in [i for i, h in enumerate(headers) if h in cut and i > 0]:
        new = max(narrow[i] - (_total(narrow) - width), 12, _longest_word(headers[i]))
        if new < narrow[i]:
            narrow[i] = new
            for r in cells:
                r[i] = fit(r[i], new)
    return (narrow, cells) if _total(narrow) <= width else (widths, rows)


def fit(text: str, width: int) -> str:
    """``text`` as it is when it has ``width`` characters or fewer, else cut to ``width``
    with "…" as its last character."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _cap_text(widths: list[int], numeric: list[bool], width: int) -> list[int]:
    """Text columns too wide to sit beside the key column wrap (the key at half the width)."""
    key = min(widths[0], width // 2)
    room = width - key - GAP
    rest = zip(widths[1:], numeric[1:], strict=True)
    return [key] + [w if num else min(w, room) for w, num in rest]


def _render(headers, rows, widths, numeric, width: int) -> str:
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for h, w, num in zip(headers, widths, numeric, strict=True):
        table.add_column(h, justify="right" if num else "left", width=w, overflow="fold")
    for r in rows:
        table.add_row(*r)
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, highlight=False, emoji=False,
                      markup=False, legacy_windows=False)  # fmt: skip
    console.print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()).strip("\n")


def _total(widths: list[int]) -> int:
    return sum(widths) + GAP * (len(widths) - 1)


def _cell_len(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def _longest_word(text: str) -> int:
    return max((_cell_len(w) for w in text.split()), default=0)


def _numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or cell[0] in "+-.~") and cell != NA


def markdown_text(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def line(cells):
        return "| " + " | ".join(cell(c).replace("|", "\\|") for c in cells) + " |"

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
