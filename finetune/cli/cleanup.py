"""`finetune cleanup`: terminate what finetune left running in EC2 that no live run owns."""

from __future__ import annotations

import sys

import typer


def cleanup(
    older_than: str = typer.Option(
        "6h", "--older-than", help="Only what is older than this (e.g. 30m, 6h, 2d)."
    ),
    yes: bool = typer.Option(False, "--yes", help="Remove without asking."),
) -> None:
    """Find instances, open spot requests and instance roles tagged by finetune that no live
    run owns, and remove them (terminate, cancel, delete). Without --yes it asks first."""
    from finetune.backends.ec2 import cleanup as ec2_cleanup
    from finetune.backends.ec2 import infra as ec2_infra
    from finetune.cli._duration import parse_duration
    from finetune.runs.ledger import ACTIVE, open_default

    limit = parse_duration(older_than, "--older-than")
    with open_default() as ledger:
        live = {r.id for r in ledger.list() if r.status in ACTIVE}
    clients = ec2_infra.Clients()
    orphans = ec2_cleanup.find_orphans(clients, live, limit)
    if not orphans:
        typer.echo(
            f"Nothing to clean up: no finetune resource older than {older_than} is orphaned."
        )
        return
    for o in orphans:
        run = o.run_id or "(no run tag)"
        typer.echo(f"  {o.kind:<16} {o.id:<40} run {run}  {o.age_s / 3600:.1f} h  {o.detail}")
    if not yes and not _confirm(len(orphans)):
        typer.echo("Nothing removed. Re-run with --yes to remove them.")
        return
    for line in ec2_cleanup.remove(clients, orphans):
        typer.echo(line)


def _confirm(count: int) -> bool:
    if not sys.stdin.isatty():
        return False
    return typer.confirm(f"Remove these {count} resource(s)?", default=False)
