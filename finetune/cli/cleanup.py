"""`finetune cleanup`: remove what finetune left in the cloud that no live run owns."""

from __future__ import annotations

import sys

import typer


def cleanup(
    older_than: str = typer.Option(
        "6h", "--older-than", help="Only what is older than this (e.g. 30m, 6h, 2d)."
    ),
    yes: bool = typer.Option(False, "--yes", help="Remove without asking."),
    owner: str = typer.Option(
        None, "--owner", help="Whose leftovers: this finetune:owner tag (default: your identity)."
    ),
    all_owners: bool = typer.Option(
        False,
        "--all-owners",
        help="Everyone's leftovers, not only yours (shared accounts: careful).",
    ),
) -> None:
    """Find instances, open spot requests and instance roles tagged by finetune that no live
    run owns (a launch killed before its backend answered counts as dead after 15 minutes),
    and remove them (terminate, cancel, delete). Only yours: tagged with your identity (the
    finetune:owner tag) or runs of this machine's ledger; others are listed as skipped, with
    why. Without --yes it asks first."""
    from finetune.runs.ledger import open_default
    from finetune.service import cleanup as service_cleanup
    from finetune.units.durations import parse_duration

    limit = parse_duration(older_than, "--older-than", minimum=0)  # 0s: whatever age
    with open_default() as ledger:
        found = service_cleanup.find(ledger, limit, owner=owner, all_owners=all_owners)
        _say_skipped(found.skipped)
        if not found:
            typer.echo(
                f"Nothing to clean up: no finetune resource older than {older_than} is orphaned."
            )
            return
        for orphans in found.orphans.values():
            for o in orphans:
                run = o.run_id or "(no run tag)"
                age = o.age_s / 3600
                typer.echo(f"  {o.kind:<16} {o.id:<40} run {run}  {age:.1f} h  {o.detail}")
        for run in found.abandoned:
            typer.echo(f"  {'abandoned run':<16} {run.id:<40} launched, never accepted")
        if not yes and not _confirm(len(found.abandoned) + sum(map(len, found.orphans.values()))):
            typer.echo("Nothing removed. Re-run with --yes to remove them.")
            return
        for line in service_cleanup.remove(ledger, found):
            typer.echo(line)


def _say_skipped(skipped) -> None:
    if skipped:
        typer.echo(f"Skipped {len(skipped)} resource(s) that are not yours to remove:")
    for o in skipped:
        typer.echo(f"  {o.kind:<16} {o.id:<40} run {o.run_id or '(none)'}  {o.skipped}")
    if skipped:
        typer.echo("  (--owner NAME or --all-owners to include them)")


def _confirm(count: int) -> bool:
    if not sys.stdin.isatty():
        return False
    return typer.confirm(f"Remove these {count} resource(s)?", default=False)
