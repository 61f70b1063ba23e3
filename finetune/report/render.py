"""A cost and scaling report over runs, rendered as a text table, JSON, CSV or Markdown.

``build_report`` does the arithmetic (through cost.py and speedup.py); the renderers only
format. Every report ends with one provenance line: which prices and which EUR rate, dated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from finetune.errors import UsageError, did_you_mean
from finetune.estimate import cost
from finetune.report import speedup
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

FORMATS = ("table", "json", "csv", "markdown")


@dataclass(frozen=True)
class ReportRow:
    """Everything the report says about one run (None where a figure cannot be computed)."""

    run_id: str
    recipe: str
    dataset: str
    model: str
    backend: str
    instance_type: str
    region: str
    hosts: int
    devices: int  # GPUs, or CPU contexts for a CPU run (see device_kind)
    spot: bool
    wall_seconds: float
    billable_seconds: float  # per instance, as billed (0 for runs that cost nothing)
    epochs: int
    images_per_sec: float | None
    images_per_sec_per_device: float | None
    speedup: float | None
    efficiency: float | None
    baseline_runs: tuple[str, ...]
    best_val_acc: float | None
    eur: float | None  # None when a price was unknown
    eur_per_epoch: float | None
    spot_savings: float | None
    time_to_target_seconds: float | None
    eur_to_target: float | None
    status: str = "completed"
    engine: str = ""
    device_kind: str = "gpu"
    sweep_values: tuple[tuple[str, str], ...] = ()
    # the 1-device run's wall time / this run's: what the clock saw, start-up and data copy
    # included, beside ``speedup`` (steady-state images/s, warm-up excluded)
    wall_speedup: float | None = None


@dataclass(frozen=True)
class Report:
    rows: list[ReportRow]
    totals: dict
    provenance: str
    target_acc: float | None = None
    notes: list[str] = field(default_factory=list)


def _row(run: RunFacts, sc: speedup.Scaling, target: float | None) -> ReportRow:
    eur = run.money.eur  # 0 for local runs; None when a price was unknown
    return ReportRow(
        run_id=run.run_id,
        recipe=run.recipe,
        dataset=run.dataset,
        model=run.model,
        backend=run.backend,
        instance_type=run.instance_type,
        region=run.region,
        hosts=run.hosts,
        devices=run.devices,
        spot=run.spot,
        wall_seconds=run.wall_seconds,
        billable_seconds=run.billable_seconds,
        epochs=len(run.epochs),
        images_per_sec=run.images_per_sec,
        images_per_sec_per_device=run.images_per_sec_per_device,
        speedup=sc.speedup,
        efficiency=sc.efficiency,
        baseline_runs=sc.baseline_runs,
        best_val_acc=run.best_val_acc,
        eur=eur,
        eur_per_epoch=cost.eur_per_epoch(eur, len(run.epochs)),
        spot_savings=cost.spot_savings(run.money),
        time_to_target_seconds=speedup.time_to_accuracy(run.epochs, target) if target else None,
        eur_to_target=speedup.eur_to_accuracy(run, target) if target else None,
        status=run.status,
        engine=run.engine,
        device_kind=run.device_kind,
        sweep_values=run.sweep_values,
        wall_speedup=sc.wall_speedup,
    )


def provenance(runs: list[RunFacts]) -> str:
    """'Prices: <type market USD/h (source, as of date)>. EUR: 1 EUR = x USD on <date>, y USD
    on <date> (<source>)' over all runs: each price and rate once, each rate's source once
    after the rates it gave (one footnote, however many days the runs span)."""
    priced = dict.fromkeys(p for r in runs for p in r.money.prices())
    by_source: dict[str, dict[str, None]] = {}
    for r in runs:
        rate = r.money.rate
        by_source.setdefault(rate.source, {})[
            f"{rate.usd_per_eur:.4f} USD on {rate.on.isoformat()}"
        ] = None
    rates = [f"1 EUR = {', '.join(given)} ({source})" for source, given in by_source.items()]
    return f"Prices: {'; '.join(priced) or 'none'}. EUR: {'; '.join(rates) or 'none'}."


def build_report(
    runs: list[RunFacts],
    target_acc: float | None = None,
    pool: Sequence[RunFacts] = (),
    skipped: Sequence[str] = (),
) -> Report:
    """Per-run figures, totals, notes on what could not be computed (and on ``skipped`` rows),
    and the provenance. ``pool``: more runs that may serve as 1-device baselines."""
    if target_acc is not None:
        speedup.check_target(target_acc)
    figures = speedup.scaling(runs, [p for p in pool if p.run_id not in {r.run_id for r in runs}])
    rows = [_row(r, s, target_acc) for r, s in zip(runs, figures, strict=True)]
    notes = list(skipped)
    notes += [
        f"{r.run_id}: no throughput metrics, so no speedup or efficiency."
        for r in rows
        if not r.images_per_sec
    ]
    notes += [f"{r.run_id}: a price is unknown, so no euros." for r in rows if r.eur is None]
    notes += [
        f"{r.run_id}: no efficiency: no other 1-device run with the same recipe, dataset, "
        "model, engine, GPU model, batch per device and image size."
        for r in rows
        if r.images_per_sec and r.speedup is None and r.devices > 1
    ]
    totals = {
        "runs": len(rows),
        "eur": sum(r.eur for r in rows if r.eur is not None),
        "wall_seconds": sum(r.wall_seconds for r in rows),
        "gpu_hours": sum(r.billable_seconds * r.devices for r in rows if r.device_kind == "gpu")
        / 3600,
    }
    return Report(rows, totals, provenance(runs), target_acc, notes)


def check_format(fmt: str) -> str:
    """``fmt`` in lower case if it is one of FORMATS ("md" is markdown), else a UsageError."""
    fmt = fmt.strip().lower()
    fmt = "markdown" if fmt == "md" else fmt
    if fmt not in FORMATS:
        raise UsageError(
            f'Unknown format "{fmt}".{did_you_mean(fmt, FORMATS)}',
            f"use one of {', '.join(FORMATS)}.",
        )
    return fmt


def render(report: Report, fmt: str = "table", width: int | None = None) -> str:
    """The report as text in ``fmt``: table (fitting ``width`` columns, default the
    terminal's), json, csv or markdown."""
    fmt = check_format(fmt)
    if fmt == "json":
        return json.dumps(
            {
                "runs": [asdict(r) for r in report.rows],
                "totals": report.totals,
                "target_acc": report.target_acc,
                "notes": report.notes,
                "provenance": report.provenance,
            },
            indent=2,
        )
    if fmt == "csv":
        names = list(ReportRow.__dataclass_fields__)
        return rows_to_csv(names, [[_csv_value(getattr(r, n)) for n in names] for r in report.rows])
    headers, rows = _human(report)
    footer = [_totals_line(report), *_status_line(report), *target_line(report.target_acc),
              *report.notes]  # fmt: skip
    if any(r.speedup is not None for r in report.rows):
        footer.append(SPEEDUP_LEGEND)
    footer.append(report.provenance)
    if fmt == "markdown":
        return markdown_text(headers, rows) + "\n\n" + "\n\n".join(footer) + "\n"
    footer = [wrap_text(line, width) for line in footer]
    table = table_text(headers, rows, width, text=(DEVICES,))
    return table + "\n\n" + "\n".join(footer) + "\n"


# The table's ReportRow fields, within 120 columns; JSON and CSV carry every field
# (docs/decisions/063-cost-report-table-columns.md).
COLUMNS = ["run_id", "status", "devices", "spot", "wall_seconds",
           "images_per_sec", "speedup", "wall_speedup", "efficiency", "best_val_acc",
           "eur"]  # fmt: skip
SPEEDUP_LEGEND = (
    "speedup: steady-state images/s against the 1-device run (warm-up excluded); wall "
    "speedup: the 1-device run's wall time / this run's (start-up and data copy included)."
)
TARGET_COLUMNS = ["time_to_target_seconds", "eur_to_target"]
HEADERS = [header_of(c) for c in COLUMNS]
DEVICES = header_of("devices")  # '16 GPU ml.p4d.24xlarge': text, wrapping at its spaces


def _human(report: Report) -> tuple[list[str], list[list[str]]]:
    target = report.target_acc is not None
    headers = HEADERS + ([header_of(c) for c in TARGET_COLUMNS] if target else [])
    rows = []
    for r in report.rows:
        cells = [
            r.run_id,
            r.status,
            f"{r.devices} {r.device_kind.upper()} {r.instance_type}",  # instance: DEVICES
            "yes" if r.spot else "no",
            duration(r.wall_seconds),
            number(r.images_per_sec),
            number(r.speedup, ".2f", "x"),
            number(r.wall_speedup, ".2f", "x"),
            percent(r.efficiency),
            percent(r.best_val_acc),
            euros(r.eur),
        ]
        if target:
            cells += [duration(r.time_to_target_seconds), euros(r.eur_to_target)]
        rows.append(cells)
    if len({r.status for r in report.rows}) == 1:  # one status: said once (_status_line)
        headers = [h for i, h in enumerate(headers) if i != 1]
        rows = [[c for i, c in enumerate(row) if i != 1] for row in rows]
    return headers, rows


def _status_line(report: Report) -> list[str]:
    statuses = {r.status for r in report.rows}
    return [f"All {len(report.rows)} run(s) {statuses.pop()}."] if len(statuses) == 1 else []


def target_line(target_acc: float | None) -> list[str]:
    """The footer line naming the target of the 'time/EUR to target' columns (if any)."""
    if target_acc is None:
        return []
    return [f"Target: {target_acc:.1%} validation accuracy (time and EUR to reach it)."]


def _totals_line(report: Report) -> str:
    t = report.totals
    billed = f", {t['gpu_hours']:.2f} GPU-hours billed" if t["gpu_hours"] else ""
    return (
        f"Total: {t['runs']} run(s), {euros(t['eur'])} EUR, {duration(t['wall_seconds'])} "
        f"wall{billed}."
    )


def _csv_value(value):
    if isinstance(value, tuple):
        return " ".join("=".join(v) if isinstance(v, tuple) else v for v in value)
    return "" if value is None else value
