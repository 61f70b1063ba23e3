"""`finetune check`: is this machine and account ready for a cloud run? One line per item,
ok / missing / unknown, each not ok with its fix; exit 1 while anything is missing, and
"Ready" only when nothing is missing or unknown."""

from __future__ import annotations

import textwrap
from typing import Annotated

import typer

from finetune.cli._options import Backend, Format, Help, Instance, Region, Spot, typed_flags
from finetune.cli._render import check_format, echo_json
from finetune.report.text import terminal_width
from finetune.service import readiness

MARK = {"ok": "ok", "missing": "MISSING", "unknown": "unknown"}


@typed_flags
def check(
    backend: Annotated[
        Backend[str | None],
        Help("Check this backend only (default: every cloud backend, or --instance's)."),
    ] = None,
    instance: Annotated[
        Instance,
        Help("The instance type whose GPU quota to check (default: g5.xlarge's family)."),
    ] = None,
    spot: Annotated[Spot, Help("Check the spot quota instead.")] = False,
    region: Region[str | None] = None,
    fmt: Annotated[Format, Help("table or json (any case).")] = "table",
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
    if report.blocked:
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
    out.append(_verdict(report))
    return out


def _verdict(report) -> str:
    missing, unknown = report.count("missing"), report.count("unknown")
    if missing:
        also = f", {unknown} unknown" if unknown else ""
        return f"Not ready: {missing} missing{also} (each with its fix above)."
    if unknown:
        return f"Not confirmed: {unknown} unknown, nothing missing (each with its fix above)."
    return "Ready for cloud runs." if "account" in report.sections else "Ready."  # local only


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` in lines of ``width``, broken at spaces only (ARNs and URIs stay whole where
    they fit)."""
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False)  # fmt: skip
