"""The library call behind `finetune cost-report`: which runs, against which baselines, as
which report (a sweep's seeds table or the runs' table). cli/cost_report.py parses, calls
:func:`cost_report` and renders."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from finetune.errors import UsageError
from finetune.report import sweep as sweep_view
from finetune.report.render import Report, build_report, render
from finetune.report.sweep import CellRow
from finetune.runs.facts import finished_facts


@dataclass(frozen=True)
class CostReport:
    """A report over runs; ``sweep_rows`` holds a sweep's CellRows (None: not a sweep)."""

    report: Report
    sweep_rows: list[CellRow] | None = None

    def text(self, fmt: str) -> str:
        """The report rendered in ``fmt`` (checked by report.render.check_format)."""
        if self.sweep_rows is not None:
            return sweep_view.render_sweep(self.report, self.sweep_rows, fmt)
        return render(self.report, fmt)


def parse_since(since: str | None) -> float | None:
    """``--since YYYY-MM-DD`` as a timestamp; None when not given."""
    if not since:
        return None
    try:
        return datetime.fromisoformat(since).timestamp()
    except ValueError:
        raise UsageError(f"--since {since!r} is not a date", "use YYYY-MM-DD.") from None


def cost_report(
    ledger,
    runs=(),
    recipe: str | None = None,
    since: str | None = None,
    sweep: str | None = None,
    target_accuracy: float | None = None,
) -> CostReport:
    """The report of the ended runs asked for (ids, or the filters). Runs that cannot be
    reported are skipped with a note. Runs named by id keep their speedup: their 1-device
    baseline is looked for over every ended run in the ledger. With ``sweep``, the seeds'
    table of that sweep (target accuracy by default the best every cell reached)."""
    since_ts = parse_since(since)
    skipped: list[str] = []
    facts = finished_facts(ledger, runs or (), recipe, since_ts, sweep, skipped)
    # a run reported alone keeps its speedup: its baseline may be anywhere in the ledger
    pool = finished_facts(ledger, skipped=[]) if runs else []
    if not facts:
        what = f"no finished runs of sweep {sweep}" if sweep else "no finished runs match"
        raise UsageError(what, "launch one with `finetune launch`, or widen the filters.")
    if sweep:
        report, rows = sweep_view.build(facts, target_accuracy, skipped)
        return CostReport(report, rows)
    return CostReport(build_report(facts, target_accuracy, pool, skipped))
