"""``python -m finetune.estimate.perf.backtest ROWS.csv``: the model against your own figures.

ROWS.csv has calibration.csv's columns (calibration.md). Each row is predicted as the run it
was (its framework, pipeline, kind, layout, devices, precision, batch) by the bundled model,
fitted without any bundled row that shares an Id with one of yours, so pointing it at
calibration.csv itself leaves every row out. An unknown GPU or network is an error that
names the known ones; a malformed file says which row (exit 3, a DataError's, either way).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from finetune.catalog import gpu_peaks
from finetune.errors import DataError
from finetune.estimate.perf import (
    calibration,
    gpus,
    observations,
    throughput,
    traffic,
)
from finetune.estimate.perf.checked import Result, setup_of


def read(path: Path) -> list[calibration.Row]:
    """The rows of ``path``; DataError for a missing column, a malformed row, or a GPU or
    network the model does not know."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}", "give a readable CSV.") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [h for h in calibration.HEADER if h not in (reader.fieldnames or [])]
    if missing:
        raise DataError(
            f"{path} lacks the columns {', '.join(missing)}",
            f"give calibration.csv's columns: {', '.join(calibration.HEADER)}.",
        )
    rows = [calibration._parse(r) for r in reader]  # fmt: skip
    for row in rows:
        if gpus.peak(row.gpu_model) is None or gpus.roofs(row.gpu_model, row.precision) is None:
            known = ", ".join(p.model for p in gpu_peaks.peaks())
            raise DataError(f"{path} row {row.id!r}: unknown GPU {row.gpu_model!r}",
                            f"use one of: {known}.")  # fmt: skip
        if traffic.lookup(row.network, row.image_size, row.precision) is None:
            raise DataError(f"{path} row {row.id!r}: unknown network {row.network!r} at "
                            f"{row.image_size} px",
                            f"use one of: {', '.join(traffic.networks())}.")  # fmt: skip
    return rows


def check(rows: list[calibration.Row]) -> list[Result]:
    """Each row predicted without learning from any of them."""
    bundled = {o.id for o in observations.observations()}
    gone = frozenset(r.id for r in rows) & bundled
    out = []
    for row in rows:
        p = throughput.predict(setup_of(row), exclude=gone)
        out.append(Result(row, None) if p is None else
                   Result(row, p.images_per_sec, p.low, p.high, p.level))  # fmt: skip
    return out


def report(results: list[Result]) -> dict[str, Any]:
    """The JSON the command prints with --format json."""
    errors = [abs(e) for r in results if (e := r.error) is not None]
    return {
        "rows": [
            {"id": r.row.id, "published": r.row.images_per_sec, "predicted": r.predicted,
             "low": r.low, "high": r.high, "error": r.error, "inside_band": r.inside,
             "level": r.level}
            for r in results
        ],
        "median_abs_error": statistics.median(errors) if errors else None,
        "worst_abs_error": max(errors) if errors else None,
        "inside_band": sum(1 for r in results if r.inside),
        "n": len(results),
    }  # fmt: skip


def table(out: dict[str, Any]) -> str:
    lines = [f"{'id':48} {'published':>10} {'predicted':>10} {'band':>17} {'error':>7}"]
    for r in out["rows"]:
        pred = "-" if r["predicted"] is None else f"{r['predicted']:.1f}"
        band = "-" if r["low"] is None else f"{r['low']:.0f}-{r['high']:.0f}"
        err = "-" if r["error"] is None else f"{r['error']:+.1%}"
        mark = "" if r["inside_band"] else "  outside the band"
        lines.append(f"{r['id'][:48]:48} {r['published']:10.1f} {pred:>10} {band:>17} "
                     f"{err:>7}{mark}")  # fmt: skip
    if out["median_abs_error"] is None:
        lines.append(f"\n{out['n']} row(s), none predicted")
    else:
        lines.append(
            f"\n{out['n']} row(s): median |error| {out['median_abs_error']:.1%}, worst "
            f"{out['worst_abs_error']:.1%}, inside the band {out['inside_band']}/{out['n']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m finetune.estimate.perf.backtest",
                                description="Predict your own throughput rows.")  # fmt: skip
    p.add_argument("rows", type=Path, help="a CSV in calibration.csv's columns")
    p.add_argument("--format", choices=("table", "json"), default="table")
    a = p.parse_args(argv)
    try:
        out = report(check(read(a.rows)))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(out, indent=2) if a.format == "json" else table(out))
    return 0
