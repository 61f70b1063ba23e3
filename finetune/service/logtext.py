"""A remote log, made safe to print: the trainer's output travels through CloudWatch or an
instance's train.log, and anything that can write there (the training code, a dependency, a
forged stream) could otherwise drive the reader's terminal -- retitle it, rewrite the screen,
set the clipboard (OSC 52), hide lines. Everything but text, newlines and tabs goes."""

from __future__ import annotations

import re

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


def printable(text: str) -> str:
    """``text`` without terminal escape sequences and control characters; a carriage return
    (a progress bar redrawing its line) becomes a newline, so no line hides another."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


def remote(text: str | None) -> str | None:
    """A string that came from the cloud (an exit reason from status.json or SageMaker's
    FailureReason, a backend's event) on one printable line: it is shown inline."""
    if text is None:
        return None
    return " ".join(printable(text).split("\n")).strip()


def read_logs(run, backend, offset: int = 0) -> tuple[str, int]:
    """The run's log from byte ``offset`` on, printable, and the offset to continue from."""
    text, offset = backend.logs(run, offset)
    return printable(text), offset
