"""`finetune plan` as text: what is planned and the two picks with their commands on top, then
one table of the cheapest rows (one line each, short columns: the basis's detail is behind
--explain), then one legend; or JSON and CSV for scripts, every row and every field
(ranking.rank.COLUMNS)."""

from __future__ import annotations

import json
import shlex

from finetune.ranking.rank import COLUMNS, Pick, PlanResult, Row
from finetune.report.text import header_of, rows_to_csv, table_text, terminal_width, wrap_text

FORMATS = ("table", "json", "csv")


DEFAULT_TOP = 10
# the table's columns: what, how long, how much, where; the detail stays in JSON/CSV and --all
# (their headers are the JSON keys' words, as every table's: report.text.header_of)
TABLE = ("rank", "instance", "gpus", "minutes", "eur", "market", "backend", "region", "pareto",
         "basis")  # fmt: skip


def render(
    result: PlanResult,
    fmt: str = "table",
    width: int | None = None,
    top: int | None = DEFAULT_TOP,
    explain: bool = False,
) -> str:
    """``result`` in ``fmt`` (table, json or csv). The table shows the ``top`` rows by euros
    (None: every row) and the picks, one line each; ``explain`` adds each shown row's basis
    (throughput and its band)."""
    if fmt == "json":
        return json.dumps(to_dict(result), indent=2) + "\n"
    if fmt == "csv":
        rows = [[_csv(getattr(r, c)) for c in COLUMNS] for r in result.rows]
        return rows_to_csv(list(COLUMNS), rows)
    head = [result.title] if result.title else []
    head += [f"dataset: {result.dataset_note}"] if result.dataset_note else []
    head = [wrap_text(h, width) for h in head]
    head += _pick_lines(result.cheapest, width)
    fastest = result.fastest
    same = result.cheapest and fastest and result.cheapest.row == fastest.row
    if same and fastest:  # one row is both: its command once
        rule = fastest.why.partition(":")[0].removeprefix("the ")
        head.append(f"{rule}: the same (row {fastest.row.rank})")
    else:
        head += _pick_lines(result.fastest, width)
    if result.cheapest is None:
        head.append("cheapest: no candidate finishes within the deadline (see the min column)")
    if result.fastest is None:
        head.append("fastest: no candidate costs less than the budget (see the EUR column)")
    shown = _shown(result, top)
    columns = [c for c in TABLE if c != "region" or len({r.region for r in shown}) > 1]
    if "region" not in columns and shown:  # one region: said once, not on every row
        where = f"in {shown[0].region}"
        if result.title:  # wrapped again with it (wrap_text reads line breaks as spaces)
            head = [wrap_text(f"{head[0]}; {where}", width), *head[1:]]
        else:
            head = [where, *head]
    cells = [dict(zip(TABLE, _cells(r), strict=True)) for r in shown]
    body = table_text([header_of(c) for c in columns], [[c[k] for k in columns] for c in cells],
                      width)  # fmt: skip
    more = "" if len(shown) == len(result.rows) else " (--top N, --all)"
    tail = [f"{len(shown)} of {len(result.rows)} candidates, cheapest first{more}; pareto *: "
            "on the time-vs-euros front; gpus: hosts x GPUs each; basis: model = performance "
            "model, measured = your runs, (data) = data-bound (--explain)."]  # fmt: skip
    if explain:
        tail += [f"#{r.rank} {r.hosts} x {r.instance}: {r.explain or r.basis}" for r in shown]
    if result.unestimated:
        tail.append(f"not estimated: {len(result.unestimated)} (--format json lists them)")
    if result.notes:
        tail.append("left out: " + _grouped(result.notes))
    tail.append(result.provenance if explain or not result.provenance_short
                else result.provenance_short)  # fmt: skip
    tail = [wrap_text(t, width) for t in tail if t]
    return "\n".join(head) + "\n\n" + body + "\n\n" + "\n".join(tail) + "\n"


def _shown(result: PlanResult, top: int | None) -> list[Row]:
    """The first ``top`` rows by euros, and the picks wherever they rank."""
    if top is None:
        return list(result.rows)
    picked = {p.row.rank for p in (result.cheapest, result.fastest) if p is not None}
    return [r for r in result.rows if r.rank <= top or r.rank in picked]


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


def _pick_lines(p: Pick | None, width: int | None = None) -> list[str]:
    """The pick in words (wrapped), then its command on one line (to copy whole)."""
    if p is None:
        return []
    r = p.row
    rule, _, rest = p.why.partition(":")  # "the cheapest done within 3 h: ... (ties ...)"
    tie = rest.partition(" (")[2].rstrip(")")
    text = (f"{rule.removeprefix('the ')}: ~{r.minutes:.1f} min, ~{r.eur:.2f} EUR on {r.hosts} x "
            f"{r.instance} {r.market} ({r.backend}, {r.region}; row {r.rank})")  # fmt: skip
    text += f" -- {tie} min, the cheaper wins" if tie else ""
    return [wrap_text(text, width), *command_lines(p.command, width)]


def command_lines(command: str, width: int | None = None) -> list[str]:
    """A shell command indented, broken at spaces between arguments with `` \\`` line
    continuations so that no line passes ``width`` and it still pastes as one command."""
    width = width or terminal_width()
    lines, line = [], " "
    for word in (shlex.quote(w) if "=" not in w else w for w in shlex.split(command)):
        if len(line) > 2 and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = "   "
        line += " " + word
    return [*lines, line]


def _grouped(notes: list[str]) -> str:
    """ "B200: why; H100: why" as "B200, H100: why": one reason said once."""
    by_reason: dict[str, list[str]] = {}
    for note in notes:
        what, sep, why = note.partition(": ")
        by_reason.setdefault(why if sep else note, []).append(what if sep else "")
    return "; ".join(
        f"{', '.join(w for w in whats if w)}: {why}" if any(whats) else why
        for why, whats in by_reason.items()
    )


def _cells(r: Row) -> list[str]:
    gpus = f"{r.hosts}x{r.gpus // r.hosts} {r.gpu}" if r.hosts > 1 else f"{r.gpus} {r.gpu}"
    basis = r.basis.split(":", 1)[0] + (" (data)" if r.data_bound else "")
    eur = f"{r.eur:.2f}" if r.eur >= 0.995 or r.eur == 0 else f"{r.eur:.3f}"
    return [str(r.rank), r.instance, gpus, f"{r.minutes:.1f}", eur, r.market, r.backend,
            r.region, "*" if r.pareto else "", basis]  # fmt: skip


def _csv(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v
