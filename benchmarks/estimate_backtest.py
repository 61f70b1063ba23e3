"""Backtest: the performance model predicts every row it knows without learning from it.

    PYTHONPATH=. .venv/bin/python benchmarks/estimate_backtest.py [--mode row|gpu|source|family]
        [--gpu-out] [--csv] [--write-data]

Prints one line per row of finetune/catalog/calibration.csv for ``--mode`` (default: leave
the row out; ``--gpu-out``: leave every row of its GPU out): id, kind, published images/s,
predicted, the band and the error. Then the figures of every mode over the 182 published
rows -- leave one row out, leave the GPU out, leave the source out, leave the family out --
with the median signed error per GPU with its GPU left out; gpu-check's measured rows, each
predicted with every row of its GPU left out (and with only itself); ResNet-152 on each
measured GPU with no ResNet-152 row of that GPU; and the studies' scaling table.
``--write-data`` rewrites finetune/estimate/perf/bands.csv from these errors (5th-95th
percentile per level of evidence) and efficiencies.csv from the fit to every row, before
printing. Offline, about a minute.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STUDIES = [  # (label, one-device row, n-device row)
    ("ResNet-50, 1 vs 8 K80 (MXNet study)", "beeva-resnet50-k80x1", "beeva-resnet50-k80x8"),
    ("ResNet-152, 1 vs 8 K80 (MXNet study)", "beeva-resnet152-k80x1", "beeva-resnet152-k80x8"),
    ("ResNet-50 fp32, 1 vs 4 V100 (DLE MXNet)", "dle-mx-rn50-dgx1-16g-1gpu-fp32",
     "dle-mx-rn50-dgx1-16g-4gpu-fp32"),
    ("ResNet-50 fp16, 1 vs 4 V100 (DLE MXNet)", "dle-mx-rn50-dgx1-16g-1gpu-fp16",
     "dle-mx-rn50-dgx1-16g-4gpu-fp16"),
    ("ResNet-50 fp32, 1 vs 4 V100 (Lambda)", "lambda-lambdacloud_v100_16gb_v1-fp32",
     "lambda-lambdacloud_4xv100_16gb_v1-fp32"),
]  # fmt: skip


def table(results, as_csv: bool) -> None:
    head = ("id", "kind", "source", "published", "predicted", "low", "high", "error")
    print(",".join(head) if as_csv else f"{'id':58} {'kind':9} {'published':>10} "
          f"{'predicted':>10} {'band':>19} {'error':>7}  source")  # fmt: skip
    for r in results:
        pred = "" if r.predicted is None else f"{r.predicted:.1f}"
        err = "" if r.error is None else f"{r.error:+.1%}"
        band = "" if r.low is None else f"{r.low:.0f}-{r.high:.0f}"
        if as_csv:
            src = r.row.source.replace(",", ";")
            print(f"{r.row.id},{r.row.kind},{src},{r.row.images_per_sec},{pred},"
                  f"{r.low or ''},{r.high or ''},{err}")  # fmt: skip
        else:
            print(f"{r.row.id[:58]:58} {r.row.kind:9} {r.row.images_per_sec:10.1f} "
                  f"{pred:>10} {band:>19} {err:>7}  {r.row.source[:60]}")  # fmt: skip


def line(label: str, results) -> str:
    from finetune.estimate.perf import backtest

    s = backtest.summary(results)
    if s["median_abs_error"] is None:
        return f"{label}: nothing predicted"
    return (f"{label}: median |error| {s['median_abs_error']:.1%}, worst "
            f"{s['worst_abs_error']:.1%}, inside the band {s['within_band']}/{s['rows']}"
            + (f", unpredicted {len(s['unpredicted'])}" if s["unpredicted"] else ""))  # fmt: skip


def by_gpu(results) -> None:
    """The median signed error per GPU (leave the GPU out): the model's direction."""
    got: dict[str, list[float]] = {}
    for r in results:
        if r.error is not None:
            got.setdefault(r.row.gpu_model, []).append(r.error)
    cells = [f"{g} {statistics.median(e):+.0%} ({len(e)})" for g, e in sorted(got.items())]
    print("  median signed error per GPU: " + "; ".join(cells))


def studies() -> None:
    from finetune.estimate.perf import backtest, calibration, throughput

    rows = {r.id: r for r in calibration.rows()}
    print("\nThe studies' scaling table (each multi-GPU row predicted without itself):")
    print(f"{'setup':42} {'1 dev':>7} {'n dev':>8} {'pred n':>8} {'eff pub':>8} {'eff pred':>9}")
    for label, one, many in STUDIES:
        a, b = rows[one], rows[many]
        p = throughput.predict(backtest.setup_of(b), exclude=frozenset({b.id}))
        published = b.images_per_sec / (b.devices * a.images_per_sec)
        print(f"{label:42} {a.images_per_sec:7.1f} {b.images_per_sec:8.1f} "
              f"{p.images_per_sec:8.1f} {published:8.1%} {p.efficiency:9.1%}")  # fmt: skip


def measured_rows() -> None:
    """gpu-check's rows: every row of their GPU left out, and only themselves left out."""
    from finetune.estimate.perf import backtest

    print("\ngpu-check's measured rows (finetune/catalog/measured.csv):")
    print(f"{'id':58} {'measured':>9} {'GPU out':>8} {'err':>7} {'row out':>8} {'err':>7}")
    gpu_out, row_out = backtest.run_measured("gpu"), backtest.run_measured("row")
    for a, b in zip(gpu_out, row_out, strict=True):
        cells = [f"{x.predicted:8.0f} {x.error:+7.1%}" for x in (a, b)]
        print(f"{a.row.id[:58]:58} {a.row.images_per_sec:9.1f} {cells[0]} {cells[1]}")
    print(line("every row of its GPU left out", gpu_out))
    print(line("only itself left out", row_out))


def resnet152() -> None:
    """ResNet-152 on each measured GPU with no ResNet-152 row of that GPU."""
    from finetune.estimate.perf import backtest, calibration, flops, gpus, measured

    print("\nResNet-152 with no ResNet-152 row of its GPU:")
    every = [*calibration.rows(), *measured.rows()]
    for r in measured.rows():
        if flops.network_key(r.network) != "resnet152":
            continue
        gone = frozenset(x.id for x in every if flops.network_key(x.network) == "resnet152"
                         and gpus.peak(x.gpu_model) == gpus.peak(r.gpu_model))  # fmt: skip
        p = backtest.throughput.predict(backtest.setup_of_measured(r), exclude=gone)
        err = (p.images_per_sec - r.images_per_sec) / r.images_per_sec
        print(f"  {r.id}: measured {r.images_per_sec:,.0f}, predicted {p.images_per_sec:,.0f} "
              f"({err:+.1%}, band {p.low:,.0f}-{p.high:,.0f})")  # fmt: skip


def write_efficiencies() -> None:
    """efficiencies.csv: what the fit to every row gives each stack (the model fits it
    itself; the file shows it, and tests compute by hand from it)."""
    from finetune.catalog._files import atomic_write, rows_to_csv
    from finetune.estimate.perf import fit

    head = ("Framework", "Pipeline", "Kind", "Layout", "Compile", "ComputeEfficiency",
            "MemoryEfficiency", "InstructionsPerElement", "KernelUs", "Rows", "Gpus")  # fmt: skip
    rows = []
    for s, f in sorted(fit.fitted().by_stack.items()):
        e = f.efficiency
        rows.append((s.framework, s.pipeline, s.kind, s.layout, s.compile, f"{e.compute:.12g}",
                     f"{e.memory:.12g}", f"{1 / e.issue:.12g}", f"{e.kernel_us:.12g}",
                     len(f.ids), "; ".join(sorted(f.gpus))))  # fmt: skip
    path = ROOT / "finetune" / "estimate" / "perf" / "efficiencies.csv"
    atomic_write(path, rows_to_csv(head, rows))
    path.chmod(0o644)
    print(f"efficiencies -> {path}: {len(rows)} stacks")


def write_bands(runs: dict) -> None:
    """bands.csv from the runs: 5th-95th percentile signed error per level of evidence."""
    from finetune.catalog._files import atomic_write, rows_to_csv
    from finetune.estimate.perf import bands, flops

    def errors(results, keep) -> list[float]:
        return [r.error for r in results if r.error is not None and keep(r)]

    picks = {
        "1": ("row", lambda r: r.level == 1),
        "2": ("gpu", lambda r: r.level == 2),
        "3": ("source", lambda r: r.level == 3),
        bands.FAMILY: ("family", lambda r: flops.family(r.row.network) != "resnet"),
    }
    out = []
    for level, (mode, keep) in picks.items():
        e = errors(runs[mode], keep)
        lo, hi = (bands.quantile(e, q) for q in bands.QUANTILES)
        label = runs["labels"][mode]
        out.append((level, label, f"{lo:.4f}", f"{hi:.4f}", len(e),
                    "benchmarks/estimate_backtest.py --write-data"))  # fmt: skip
    path = ROOT / "finetune" / "estimate" / "perf" / bands.FILE
    atomic_write(path, rows_to_csv(bands.HEADER, out))
    path.chmod(0o644)
    bands.bands.cache_clear()
    print(f"bands -> {path}: " + "; ".join(f"{r[0]} {r[2]}..{r[3]} ({r[4]})" for r in out))


def main() -> None:
    from finetune.estimate.perf import backtest, measured, multihost

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--mode", choices=tuple(backtest.MODES), default="row")
    args.add_argument("--gpu-out", action="store_true", help="the same as --mode gpu")
    args.add_argument("--csv", action="store_true", help="the row table as CSV")
    args.add_argument("--write-data", action="store_true",
                      help="rewrite bands.csv and efficiencies.csv first")  # fmt: skip
    a = args.parse_args()
    if a.write_data:
        runs: dict = {"labels": {m: label for m, (label, _) in backtest.MODES.items()}}
        for mode in backtest.MODES:
            gone = [
                backtest._result(r, backtest.setup_of_measured(r), backtest.MODES[mode][1](r.id))
                for r in measured.rows()
            ]
            runs[mode] = [*backtest.run(mode), *gone]  # fmt: skip
        write_bands(runs)
        write_efficiencies()
    mode = "gpu" if a.gpu_out else a.mode
    results = {m: backtest.run(m) for m in backtest.MODES}
    table(results[mode], a.csv)
    print(f"\n{len(results['row'])} published rows:")
    for m, (label, _) in backtest.MODES.items():
        print("  " + line(label, results[m]))
    by_gpu(results["gpu"])
    jitter, fitted = multihost.fitted_jitter()
    print(f"straggler jitter {jitter:.4f}, fitted to {len(fitted)} multi-GPU rows")
    measured_rows()
    resnet152()
    studies()


if __name__ == "__main__":
    main()
