"""Durations on the command line: 90s, 45m, 2h, 1h30m, 30d, 2w -- always with a unit, and
the options-model field type that reads them.

One parser, one set of rules for every duration flag (launch --max-runtime/--max-wait, runs
prune --older-than, cleanup --older-than): a bare number is refused (is `30` seconds or
days? `runs prune --older-than 30` once read it as seconds and listed every run), so are
negative durations, and zero unless the flag says zero means something.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

from finetune.errors import UsageError

_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_LONGEST = 100 * 365 * 86400  # beyond any run's age or runtime; keeps int() finite
EXAMPLES = "90s, 45m, 2h, 1h30m, 30d or 2w"


def parse_duration(text: str, option: str, minimum: int = 1) -> int:
    """Seconds in ``text``; a UsageError naming ``option`` when it is not a duration with a
    unit, is negative, or is shorter than ``minimum`` seconds (0 for a flag where zero has
    a meaning, such as `cleanup --older-than 0s`: whatever age)."""
    s = str(text).strip().lower().replace(" ", "")
    if s.startswith("-"):
        raise UsageError(
            f"{option} {text!r} is negative", f"give a positive duration, e.g. {option} 2h."
        )
    if re.fullmatch(r"\+?\d+(\.\d+)?", s):
        n = s.lstrip("+")
        raise UsageError(
            f"{option} {text!r} has no unit (seconds? days?)",
            f"add one: {n}d for days, {n}h hours, {n}m minutes, {n}s seconds or {n}w weeks "
            f"(durations are written like {EXAMPLES}).",
        )
    parts = _PART.findall(s)
    if not s or "".join(n + u for n, u in parts) != s:
        raise UsageError(
            f"{option} {text!r} is not a duration", f"write it like {EXAMPLES} (s, m, h, d, w)."
        )
    total = sum(float(n) * _UNIT[u] for n, u in parts)
    if not math.isfinite(total) or total > _LONGEST:
        raise UsageError(f"{option} {text!r} is too long", "give at most 100 years (36500d).")
    if total < minimum:
        least = "longer than 0" if minimum == 1 else f"at least {minimum} s"
        raise UsageError(
            f"{option} {text!r} is {int(total)} s: it must be {least}",
            f"give a duration like {option} 2h ({EXAMPLES}).",
        )
    return int(total)


def _seconds(value: Any, info: ValidationInfo) -> Any:
    """A duration flag's text ('2h') as seconds; numbers (a stored record) pass as they are."""
    if isinstance(value, str):
        return parse_duration(value, "--" + (info.field_name or "duration").replace("_", "-"))
    return value


# An options-model field given as a duration on the command line, kept in seconds.
Duration = Annotated[int, BeforeValidator(_seconds)]
