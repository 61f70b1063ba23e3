"""`finetune plan` as text: the picks on top, then a table that fits the terminal; or JSON
and CSV for scripts, whose keys are the table's headers (planner.rank.COLUMNS, shown as
report.text.header_of names them)."""

from __future__ import annotations

import json

from finetune.planner.rank import COLUMNS, Pick, PlanResult, Row
from finetune.report.text import csv_text, header_of, table_text, wrap_text

FORMATS = ("table", "json", "csv")


def render(result: PlanResult, fmt: str = "table", width: int | None = None) -> str:
    """``result`` in ``fmt`` (table, json or csv)."""
    if fmt == "json":
        return json.dumps(to_dict(result), indent=2) + "\n"
    if fmt == "csv":
        rows = [[_csv(getattr(r, c)) for c in COLUMNS] for r in result.rows]
        return csv_text(list(COLUMNS), rows)
    head = [line for p in (result.cheapest, result.fastest) for line in _pick_lines(p)]
    if result.cheapest is None:
        head.append("cheapest: no candidate finishes within the deadline (see the minutes column)")
    if result.fastest is None:
        head.append("fastest: no candidate costs less than the budget (see the EUR column)")
    headers = [header_of(c) for c in COLUMNS]
    body = table_text(headers, [_cells(r) for r in result.rows], width)
    tail = [f"{len(result.rows)} candidates ranked by euros; pareto: on the time-vs-euros front"]
    if result.unestimated:
        tail.append(f"not estimated ({len(result.unestimated)}): " + "; ".join(result.unestimated))
    if result.notes:
        tail.append("left out: " + "; ".join(result.notes))
    tail.append(result.provenance)
    tail = [wrap_text(t, width) for t in tail if t]
    return "\n".join(head) + "\n\n" + body + "\n\n" + "\n".join(tail) + "\n"


def to_dict(result: PlanResult) -> dict:
    """The JSON view: the picks (with their commands), every row, and what was left out."""

    def pick(p: Pick | None):
        return None if p is None else {"why": p.why, "command": p.command, **p.row.to_dict()}

    return {
        "cheapest": pick(result.cheapest),
        "fastest": pick(result.fastest),
        "rows": [r.to_dict() for r in result.rows],
        "unestimated": result.unestimated,
        "notes": result.notes,
        "provenance": result.provenance,
    }


def _pick_lines(p: Pick | None) -> list[str]:
    if p is None:
        return []
    r = p.row
    what = f"{r.hosts}x {r.instance} {r.market} on {r.backend} in {r.region}"
    return [f"{p.kind}: {what} -- {p.why}", f"  {p.command}"]


def _cells(r: Row) -> list[str]:
    out = []
    for c in COLUMNS:
        v = getattr(r, c)
        if isinstance(v, bool):
            out.append("yes" if v else "")
        elif c == "efficiency":
            out.append("-" if v is None else f"{v * 100:.1f} %")
        elif c.startswith("eur"):
            out.append(f"{v:.2f}" if v >= 1 else f"{v:.4f}")  # cents, or sub-cent detail
        elif c == "minutes":
            out.append(f"{v:.1f}")
        else:
            out.append(str(v))
    return out


def _csv(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v
