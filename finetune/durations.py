"""Durations on the command line: 90s, 45m, 2h, 1h30m, 1d (a bare number is seconds), and
the options-model field type that reads them."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

from finetune.errors import UsageError

_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, option: str) -> int:
    """Seconds in ``text``; a UsageError naming ``option`` when it is not a duration."""
    s = text.strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return int(float(s))
    parts = _PART.findall(s)
    if not s or "".join(n + u for n, u in parts) != s:
        raise UsageError(
            f"{option} {text!r} is not a duration", "write it like 90s, 45m, 2h, 1h30m or 30d."
        )
    return int(sum(float(n) * _UNIT[u] for n, u in parts))


def _seconds(value: Any, info: ValidationInfo) -> Any:
    """A duration flag's text ('2h') as seconds; numbers pass as they are."""
    if isinstance(value, str):
        return parse_duration(value, "--" + (info.field_name or "duration").replace("_", "-"))
    return value


# An options-model field given as a duration on the command line, kept in seconds.
Duration = Annotated[int, BeforeValidator(_seconds)]
