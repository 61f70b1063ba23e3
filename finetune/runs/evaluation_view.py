"""A finished run's evaluation as lines for `runs show`: which epoch the model comes from, the
test figure, and the classes it gets wrong most (from the evaluation report)."""

from __future__ import annotations

from finetune.contracts.metrics import EpochMetrics
from finetune.report.text import percent as _pct  # one format for a fraction: '59.2 %'


def evaluation_lines(epochs: list[EpochMetrics], final: dict) -> list[str]:
    """Which epoch the model comes from, the test figure, per-class accuracy, confusion."""
    last = epochs[-1] if epochs else None
    lines = []
    if last is not None and last.best_epoch is not None:
        best = epochs[last.best_epoch] if last.best_epoch < len(epochs) else None
        val = f" (val {_pct(best.val_acc)})" if best and best.val_acc is not None else ""
        lines.append(
            f"  model      weights of epoch {last.best_epoch + 1}, the best validation{val}"
        )
    if last is not None and last.test_acc is not None:
        n = (final.get("test_report") or {}).get("count")
        lines.append(
            f"  test       {_pct(last.test_acc)} top-1 on the held-out test split"
            + (f" ({n} images)" if n else "")
        )
    report = final.get("test_report") or final.get("val_report")
    if report and report.get("classes"):
        lines += _per_class_lines(report)
    return lines


def _per_class_lines(report: dict, worst: int = 5) -> list[str]:
    """The classes with the lowest accuracy and what they are mistaken for."""
    classes, per_class = report["classes"], report["per_class"]
    confusion = report["confusion"]
    scored = [(acc, i) for i, acc in enumerate(per_class) if acc is not None]
    lines = [f"  per class  ({report['split']}, {len(scored)} classes; lowest first)"]
    for acc, i in sorted(scored)[:worst]:
        row = confusion[i]
        wrong = max((n, j) for j, n in enumerate(row) if j != i) if len(row) > 1 else (0, i)
        also = f", most often taken for {classes[wrong[1]]} ({wrong[0]})" if wrong[0] else ""
        lines.append(f"    {acc:6.1%}  {classes[i]}{also}")
    return lines
