"""`finetune check`: is this machine and account ready for a cloud run? One line per item,
ok / missing / unknown, each not ok with its fix; exit 1 while anything is missing."""

from __future__ import annotations

import textwrap

import typer

from finetune.cli._render import check_format, echo_json
from finetune.report.text import terminal_width
from finetune.service import readiness

MARK = {"ok": "ok", "missing": "MISSING", "unknown": "unknown"}


def check(
    backend: str = typer.Option(
        None, help="Check this backend only (default: every cloud backend, or --instance's)."
    ),
    instance: str = typer.Option(
        None, help="The instance type whose GPU quota to check (default: g5.xlarge's family)."
    ),
    spot: bool = typer.Option(False, "--spot", help="Check the spot quota instead."),
    region: str = typer.Option(
        None, help="AWS region (default: FINETUNE_REGION, then your config)."
    ),
    fmt: str = typer.Option("table", "--format", help="table or json (any case)."),
) -> None:
    """Check credentials, region, bucket, image, run role and GPU quota, with each fix.

    Read-only, like `sky check`: nothing is created. Exits 1 while an item is missing.
    `finetune infra check` audits the account's run roles (an administrator's check)."""
    fmt = check_format(fmt, ("table", "json"))
    report = readiness.check(backend, region, instance, spot)
    if fmt == "json":
        echo_json(report.to_dict())
    else:
        for line in _lines(report):
            typer.echo(line)
    if not report.ready:
        raise typer.Exit(1)


def _lines(report) -> list[str]:
    width = max(terminal_width(), 60)
    out = []
    for section, items in report.sections.items():
        out.append(section)
        for item in items:
            head = f"  {MARK[item.status]:<8} {item.name:<12} "
            pad = " " * len(head)
            out += _wrap(item.detail, width, head, pad)
            if item.status != "ok" and item.fix:
                out += _wrap(item.fix, width, pad + "fix: ", pad + "     ")
    missing = sum(i.status == "missing" for items in report.sections.values() for i in items)
    ready = "Ready for cloud runs." if "account" in report.sections else "Ready."  # local only
    out.append(ready if not missing
               else f"Not ready: {missing} missing (each with its fix above).")  # fmt: skip
    return out


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` in lines of ``width``, broken at spaces only (ARNs and URIs stay whole where
    they fit)."""
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False)  # fmt: skip
