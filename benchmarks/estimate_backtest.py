"""Backtest: the performance model predicts every calibration row with that row left out.

    PYTHONPATH=. .venv/bin/python benchmarks/estimate_backtest.py [--gpu-out] [--csv]

Prints one line per row of finetune/catalog/calibration.csv: id, kind, source, published
images/s, predicted (from all other rows), the band, and the error; then the median and
worst absolute error (tests/catalog/test_perf_model.py bounds the median at 30 %), and the
studies' scaling table beside the published figures: 1 vs 8 K80 (ResNet-50, ResNet-152,
the MXNet fine-tuning study) and 1 vs 4 V100 (NVIDIA DeepLearningExamples, Lambda), each
multi-GPU row predicted without itself. ``--gpu-out`` leaves out every row of the predicted
row's GPU model as well: the error of transferring between GPUs. Then gpu-check's measured
rows (finetune/catalog/measured.csv), each predicted without itself, beside what the model
alone predicted for them. Offline, seconds.
"""

from __future__ import annotations

import argparse
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


def studies() -> None:
    from finetune.estimate.perf import backtest, calibration, throughput

    rows = {r.id: r for r in calibration.rows()}
    print("\nThe studies' scaling table (each multi-GPU row predicted without itself):")
    print(f"{'setup':42} {'1 dev':>7} {'n dev':>8} {'pred n':>8} {'eff pub':>8} {'eff pred':>9}")
    for label, one, many in STUDIES:
        if one not in rows or many not in rows:
            print(f"{label:42} (rows not in calibration.csv)")
            continue
        a, b = rows[one], rows[many]
        p = throughput.predict(backtest.setup_of(b), exclude=frozenset({b.id}))
        published = b.images_per_sec / (b.devices * a.images_per_sec)
        print(f"{label:42} {a.images_per_sec:7.1f} {b.images_per_sec:8.1f} "
              f"{p.images_per_sec:8.1f} {published:8.1%} {p.efficiency:9.1%}")  # fmt: skip


def measured_rows() -> None:
    """gpu-check's measured rows, each predicted without itself, and by the model alone."""
    from finetune.estimate.perf import backtest

    print("\ngpu-check's measured rows (finetune/catalog/measured.csv), each without itself:")
    print(f"{'id':58} {'measured':>9} {'model':>8} {'err':>7} {'+measured':>10} {'err':>7}")
    alone, both = backtest.run_measured(False), backtest.run_measured(True)
    for a, b in zip(alone, both, strict=True):
        cells = [f"{x.predicted:.0f} {x.error:+7.1%}" if x.error is not None else "- -"
                 for x in (a, b)]  # fmt: skip
        print(f"{a.row.id[:58]:58} {a.row.images_per_sec:9.1f} {cells[0]:>16} {cells[1]:>18}")
    for label, rs in (("model alone", alone), ("with the other measured rows", both)):
        s = backtest.summary(rs)
        print(
            f"{label}: median |error| {s['median_abs_error']:.1%}, worst "
            f"{s['worst_abs_error']:.1%}, inside the band {s['within_band']}/{s['rows']}"
        )


def main() -> None:
    from finetune.estimate.perf import backtest, multihost

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--gpu-out", action="store_true", help="leave the row's GPU out too")
    args.add_argument("--csv", action="store_true", help="the row table as CSV")
    a = args.parse_args()
    results = backtest.run(leave_gpu_out=a.gpu_out)
    table(results, a.csv)
    s = backtest.summary(results)
    jitter, fitted = multihost.fitted_jitter()
    print(f"\nrows {s['rows']}, predicted {s['predicted']}, unpredicted {s['unpredicted']}")
    print(f"median |error| {s['median_abs_error']:.1%} (bound 30 %), worst "
          f"{s['worst_abs_error']:.1%}, published figure inside the band: "
          f"{s['within_band']}/{s['rows']}; leave {'GPU' if a.gpu_out else 'row'} out")  # fmt: skip
    print(f"straggler jitter {jitter:.4f}, fitted to {len(fitted)} multi-GPU rows")
    studies()
    measured_rows()


if __name__ == "__main__":
    main()
