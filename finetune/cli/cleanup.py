"""`finetune cleanup`: remove what finetune left in the cloud that no live run owns."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from finetune.cli._options import Format, Help, OlderThan, typed_flags
from finetune.cli._render import FORMATS, check_format, emit_table
from finetune.runs.ledger import open_default
from finetune.service import cleanup as service_cleanup
from finetune.textsafe import cell
from finetune.units.durations import parse_duration


@typed_flags
def cleanup(
    older_than: Annotated[
        OlderThan, Help("Only what is older than this (e.g. 30m, 6h, 2d).")
    ] = "6h",
    yes: bool = typer.Option(False, "--yes", help="Remove without asking."),
    owner: str = typer.Option(
        None,
        "--owner",
        help="Also leftovers tagged with this finetune:owner, from any machine (yours too).",
    ),
    runs: list[str] = typer.Option(
        None,
        "--run",
        help="Also this run's leftovers, though not in this machine's ledger (repeat).",
    ),
    all_owners: bool = typer.Option(
        False,
        "--all-owners",
        help="Everyone's leftovers, not only yours (shared accounts: careful).",
    ),
    fmt: Annotated[
        Format, Help("table, json or csv: what was found (messages go to stderr).")
    ] = "table",
) -> None:
    """Find instances, open spot requests, SageMaker jobs and run roles of finetune that no
    live run owns (a launch killed before its backend answered counts as dead after 15
    minutes), and remove them (terminate, cancel, stop, delete). Only this machine's: runs of
    its ledger (at any age once they ended) or runs you name; your identity is not enough,
    as your runs from another machine may be live there. Others are listed as skipped, with
    why. Without --yes it asks first."""
    fmt = check_format(fmt, FORMATS)
    to_stderr = fmt != "table"

    def say(line: str) -> None:  # lines carry EC2 tag values, which anyone may set: inert
        typer.echo(cell(line), err=to_stderr)

    limit = parse_duration(older_than, "--older-than", minimum=0)  # 0s: whatever age
    with open_default() as ledger:
        found = service_cleanup.find(
            ledger, limit, owner=owner, all_owners=all_owners, runs=frozenset(runs or ())
        )
        _say_skipped(found.skipped, say)
        records = _records(found) if found else []
        if fmt != "table" or records:
            emit_table(fmt, HEADERS, [_cells(r) for r in records], records)
        if not found:
            say(f"Nothing to clean up: no finetune resource older than {older_than} is orphaned.")
            return
        if not yes and not _confirm(len(records)):
            say("Nothing removed. Re-run with --yes to remove them.")
            return
        for line in service_cleanup.remove(ledger, found):
            say(line)


HEADERS = ["kind", "ID", "run ID", "age hours", "detail"]  # fields: their words joined by "_"


def _records(found) -> list[dict]:
    """What was found, one record per resource (an abandoned run has no age)."""
    out = [
        {"kind": o.kind, "id": o.id, "run_id": o.run_id or None,
         "age_hours": round(o.age_s / 3600, 3), "detail": o.detail}
        for orphans in found.orphans.values()
        for o in orphans
    ]  # fmt: skip
    out += [
        {"kind": "abandoned run", "id": run.id, "run_id": run.id, "age_hours": None,
         "detail": "launched, never accepted"}
        for run in found.abandoned
    ]  # fmt: skip
    return out


def _cells(r: dict) -> list[str]:
    age = "-" if r["age_hours"] is None else f"{r['age_hours']:.1f}"
    return [r["kind"], r["id"], r["run_id"] or "(no run tag)", age, r["detail"]]


def _say_skipped(skipped, say) -> None:
    if not skipped:
        return
    say(f"Skipped {len(skipped)} resource(s) that are not yours to remove:")
    for o in skipped:
        say(f"  {o.kind:<16} {o.id:<40} run {o.run_id or '(none)'}  {o.skipped}")
    say("  (--run RUN_ID, --owner NAME or --all-owners to include them)")


def _confirm(count: int) -> bool:
    if not sys.stdin.isatty():
        return False
    return typer.confirm(f"Remove these {count} resource(s)?", default=False)
