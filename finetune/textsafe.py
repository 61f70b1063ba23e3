"""The one output filter for strings that came from elsewhere (a cloud API, a log, an EC2 tag,
a class folder's name): terminal escape sequences and control characters go, so no such
string can retitle the reader's terminal, rewrite the screen, set the clipboard (OSC 52) or
reverse a line's direction; and a CSV cell a spreadsheet would run as a formula (``=``,
``+``, ``-``, ``@``, tab, CR at its start) gets a leading ``'`` (OWASP's CSV injection advice).
Tables (report.text), CSV, `cleanup`, the follow line and error messages all pass through it;
JSON stays exact (json.dumps escapes every control character). Plain ``re`` only: the root
group and every command import it for nothing."""

from __future__ import annotations

import re
from typing import overload

_CONTROL = re.compile(
    r"""
      \x1b\[[0-?]*[\x20-/]*[@-~]?           # CSI: ESC [ parameters intermediates final
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?    # OSC: ESC ] ... BEL or ST (clipboard, title)
    | \x1b[PX^_][^\x1b]*(?:\x1b\\)?         # DCS, SOS, PM, APC strings, up to ST
    | \x1b[\x20-/]*[0-~]?                    # any other escape (ESC c resets the terminal)
    | \x9b[0-?]*[\x20-/]*[@-~]?              # the same in 8-bit form: CSI,
    | \x9d[^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?  # OSC,
    | [\x90\x98\x9e\x9f][^\x1b\x9c]*(?:\x9c|\x1b\\)?  # DCS, SOS, PM, APC
    | [\x00-\x08\x0b\x0c\x0e-\x1f\x7f]       # C0 controls but \t \n (and \r, below), DEL
    | [\x80-\x9f]                            # C1 controls (8-bit CSI, OSC, ...)
    | [\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]  # bidi overrides and marks (spoofing)
    """,
    re.VERBOSE,
)
# what makes a spreadsheet read a cell as a formula (full-width forms: some locales' Excel)
FORMULA_START = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences and control characters; a carriage return
    (a progress bar redrawing its line) becomes a newline, so no line hides another."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


@overload
def remote(text: str) -> str: ...
@overload
def remote(text: None) -> None: ...
def remote(text: str | None) -> str | None:
    """A string that came from the cloud (an exit reason, a tag, a backend's event) on one
    printable line: it is shown inline, so it cannot fake the lines around it."""
    if text is None:
        return None
    return " ".join(printable(text).split("\n")).strip()


def cell(text: str) -> str:
    """A table cell or header: printable, on one line (a newline or tab becomes a space), so a
    remote string can neither drive the terminal nor fake a row of its own."""
    return printable(text).replace("\n", " ").replace("\t", " ")


def csv_cell(value: object) -> object:
    """A CSV value made inert: a string printable, with ``'`` in front when a spreadsheet
    would take it as a formula (a plain number such as -0.5, or the lone "-" of a missing
    value, stays as it is); anything else (numbers, None) unchanged."""
    if not isinstance(value, str):
        return value
    text = printable(value)
    start = text.lstrip(" ")[:1] or text[:1]
    if start in FORMULA_START and text != "-" and not _NUMBER.fullmatch(text.strip()):
        return "'" + text
    return text
