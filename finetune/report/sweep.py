"""`cost-report --sweep ID`: the seeds' table over one sweep's cells.

Per cell: images/s, speedup and efficiency against the sweep's own 1-device cell with the same
model, engine, GPU model, batch per device and image size (report.speedup; none, and why,
where there is no such cell), time to a target accuracy (default: the best accuracy every cell
reached), euros, euros per epoch and per accuracy point, GPU utilisation, and the physical
limit: achieved TFLOP/s, % of peak and the euros the same run would cost at 100 % of peak.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from finetune.report import physical, render
from finetune.report.runfacts import RunFacts
from finetune.report.text import (
    duration,
    euros,
    header_of,
    markdown_text,
    number,
    percent,
    rows_to_csv,
    table_text,
    wrap_text,
)


@dataclass(frozen=True)
class CellRow:
    """One cell of the sweep (its latest completed run) as the seeds' table shows it."""

    run: render.ReportRow
    cell: str
    eur_per_point: float | None  # euros per accuracy point (per 1 % of best validation acc)
    gpu_util_pct: float | None
    achieved_tflops: float | None
    peak_tflops: float | None
    peak_source: str
    eur_at_peak: float | None

    @property
    def peak_share(self) -> float | None:
        """Achieved over peak TFLOP/s (the table's % of peak)."""
        if self.peak_tflops and self.achieved_tflops:
            return self.achieved_tflops / self.peak_tflops
        return None

    def record(self) -> dict:
        """One flat JSON/CSV record: the run's report row, then the cell's own figures."""
        own = {k: v for k, v in asdict(self).items() if k != "run"}
        return {**asdict(self.run), **own, "peak_share": self.peak_share}


def default_target(runs: list[RunFacts]) -> float | None:
    """The best accuracy every cell reached: the lowest of the cells' best accuracies."""
    best = [r.best_val_acc for r in runs]
    known = [b for b in best if b is not None]
    return min(known) if best and len(known) == len(best) else None


def build(runs: list[RunFacts], target: float | None = None, skipped=()) -> tuple:
    """(report over the completed cells, their CellRows); failed runs are left out, noted."""
    done = [r for r in runs if r.status == "completed"]
    notes = [*skipped] + [f"{r.run_id}: {r.status}, left out." for r in runs if r not in done]
    target = target if target is not None else default_target(done)
    report = render.build_report(done, target, skipped=notes)
    rows = [_cell(r, row) for r, row in zip(done, report.rows, strict=True)]
    return report, rows


def _cell(run: RunFacts, row: render.ReportRow) -> CellRow:
    achieved = physical.achieved_tflops(run)
    peak, source = physical.peak_tflops(run)
    share = achieved / peak if achieved and peak else None
    acc = row.best_val_acc
    return CellRow(
        run=row,
        cell=" ".join(f"{k}={v}" for k, v in run.sweep_values) or row.run_id,
        eur_per_point=row.eur / (acc * 100) if row.eur is not None and acc else None,
        gpu_util_pct=physical.gpu_util(run),
        achieved_tflops=achieved,
        peak_tflops=peak,
        peak_source=source,
        eur_at_peak=row.eur * share if row.eur is not None and share else None,
    )


# the seeds' columns: CellRow.record() keys, shown as report.text.header_of names them
COLUMNS = ["cell", "run_id", "engine", "instance_type", "devices", "images_per_sec", "speedup",
           "efficiency", "best_val_acc", "eur", "eur_per_epoch", "eur_per_point", "gpu_util_pct",
           "achieved_tflops", "peak_share", "eur_at_peak"]  # fmt: skip
HEADERS = [header_of(c) for c in COLUMNS]


def render_sweep(report, rows: list[CellRow], fmt: str = "table") -> str:
    """The seeds' table (table, markdown, json or csv) with notes and provenance."""
    if fmt == "json":
        doc = {"cells": [c.record() for c in rows], "target_acc": report.target_acc,
               "notes": report.notes, "provenance": report.provenance}  # fmt: skip
        return json.dumps(doc, indent=2)
    if fmt == "csv":
        flat = [c.record() for c in rows]
        names = list(flat[0]) if flat else []
        return rows_to_csv(names, [[_plain(d[n]) for n in names] for d in flat])
    headers = list(HEADERS)
    if report.target_acc is not None:
        headers += [header_of(c) for c in render.TARGET_COLUMNS]
    body = [_human(c, report.target_acc is not None) for c in rows]
    table = markdown_text(headers, body) if fmt == "markdown" else table_text(headers, body)
    peaks = sorted({c.peak_source for c in rows})
    footer = [*render.target_line(report.target_acc), *report.notes]
    footer += [f"Peak TFLOP/s: {'; '.join(peaks) or 'n/a'}.", report.provenance]
    if fmt != "markdown":  # the footer wraps at the terminal's width, as the table does
        footer = [wrap_text(line) for line in footer]
    return table + "\n\n" + "\n".join(footer) + "\n"


def _human(c: CellRow, with_target: bool) -> list[str]:
    r = c.run
    cells = [
        c.cell, r.run_id, r.engine or "-", r.instance_type, f"{r.devices} {r.device_kind.upper()}",
        number(r.images_per_sec), number(r.speedup, ".2f", "x"), percent(r.efficiency),
        percent(r.best_val_acc), euros(r.eur), euros(r.eur_per_epoch),
        number(c.eur_per_point, ".3f"), number(c.gpu_util_pct, ".0f", " %"),
        number(c.achieved_tflops, ".2f"),
        "n/a" if c.peak_share is None else percent(c.peak_share),
        euros(c.eur_at_peak) if c.eur_at_peak is not None else "n/a",
    ]  # fmt: skip
    if with_target:
        cells += [duration(r.time_to_target_seconds), euros(r.eur_to_target)]
    return cells


def _plain(value):
    if isinstance(value, tuple):
        return " ".join("=".join(v) if isinstance(v, tuple) else str(v) for v in value)
    return "" if value is None else value
