"""An independent recount of validation accuracy: saved predictions against the .lst labels
(neither the engine nor its evaluator is involved)."""

from __future__ import annotations

import csv

from finetune.data.lst import read as read_lst


def recount(root, ds, prefix: str = "shapes") -> list[tuple[float, int]]:
    """(accuracy, count) of every epoch, recounted from the saved predictions and the .lst
    labels -- an independent count: neither the engine nor the evaluator is involved."""
    truth = [int(label) for _, label, _ in read_lst(ds / f"{prefix}_val.lst")]
    out = []
    for path in sorted((root / "output" / "data" / "predictions").glob("val-epoch-*.csv")):
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        assert [int(r["label"]) for r in rows] == truth
        hits = sum(int(r["top1"]) == t for r, t in zip(rows, truth, strict=True))
        out.append((hits / len(truth), len(rows)))
    return out
