"""Exact evaluation: every record of a split counted once, in file order, whatever the loader.

Loaders pad their last batch (MXNet's ImageRecordIter repeats records and still reports
``pad == 0``; samplers of distributed runs repeat records too), so an engine never trusts its
loader's padding: it feeds every batch to an :class:`Evaluator`, which knows how many records
the split holds and their labels (read from the .rec itself, independently of the loader),
takes exactly that many, checks that the loader's labels are the file's labels in file order,
and ignores the rest. The result carries top-1/top-k accuracy, the confusion matrix, per-class
accuracy and every prediction, so an accuracy can be recounted from the saved predictions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from finetune.data.recordio import RecordReader, unpack_header
from finetune.errors import DataError
from finetune.files import write_atomic


def record_labels(rec: Path, idx: Path) -> np.ndarray:
    """The label of every record of a split, in .idx order (the order loaders read it)."""
    labels = []
    with RecordReader(rec, idx) as reader:
        for key in reader.keys:
            header, _ = unpack_header(reader.read_key(key))
            labels.append(header.class_label)
    return np.asarray(labels, dtype=np.int64)


@dataclass
class Evaluation:
    """What one pass over a split measured."""

    split: str
    labels: np.ndarray  # (N,) true labels, file order
    top: np.ndarray  # (N, k) predicted classes, best first
    num_classes: int

    @property
    def count(self) -> int:
        return len(self.labels)

    @property
    def predictions(self) -> np.ndarray:
        return self.top[:, 0]

    @property
    def accuracy(self) -> float:
        return float((self.predictions == self.labels).mean()) if self.count else 0.0

    def top_k_accuracy(self) -> float | None:
        """Top-k accuracy for the k the evaluator was given (None when k < 2)."""
        if self.top.shape[1] < 2 or not self.count:
            return None
        return float((self.top == self.labels[:, None]).any(axis=1).mean())

    def confusion(self) -> np.ndarray:
        """(classes, classes) counts: rows are true classes, columns predicted ones."""
        matrix = np.zeros((self.num_classes, self.num_classes), dtype=np.int64)
        np.add.at(matrix, (self.labels, self.predictions), 1)
        return matrix

    def per_class(self) -> list[float | None]:
        """Accuracy of each class (None for a class with no records in this split)."""
        matrix = self.confusion()
        totals = matrix.sum(axis=1)
        return [float(matrix[c, c] / t) if t else None for c, t in enumerate(totals)]

    def report(self, classes: list[str], epoch: int | None = None) -> dict:
        """A JSON-ready summary (what `runs show` prints)."""
        return {
            "split": self.split,
            "epoch": epoch,
            "count": self.count,
            "accuracy": self.accuracy,
            "top_k": self.top_k_accuracy(),
            "k": int(self.top.shape[1]),
            "classes": classes,
            "per_class": self.per_class(),
            "confusion": self.confusion().tolist(),
        }

    def save_report(self, folder: Path, classes: list[str], epoch: int | None = None) -> None:
        """``<split>-report.json``: accuracy, per-class accuracy, confusion matrix."""
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.report(classes, epoch), indent=1) + "\n"
        write_atomic(folder / f"{self.split}-report.json", text)

    def save_predictions(self, path: Path) -> None:
        """One CSV row per record, file order: index,label,top1..topk."""
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = ["index,label," + ",".join(f"top{i + 1}" for i in range(self.top.shape[1]))]
        for i, (label, top) in enumerate(zip(self.labels, self.top, strict=True)):
            rows.append(f"{i},{label}," + ",".join(str(int(t)) for t in top))
        write_atomic(path, "\n".join(rows) + "\n")


class Evaluator:
    """Collects one pass's batches; takes exactly ``len(labels)`` records, in order."""

    def __init__(self, split: str, labels: np.ndarray, num_classes: int, k: int = 1) -> None:
        self.split = split
        self.labels = labels
        self.num_classes = num_classes
        self.k = max(1, min(k, num_classes))
        self._tops: list[np.ndarray] = []
        self.seen = 0

    @property
    def done(self) -> bool:
        return self.seen >= len(self.labels)

    def add(self, scores: np.ndarray, labels: np.ndarray) -> bool:
        """One batch of scores (B, classes) and the loader's labels (B,); returns whether
        more records are needed. Records past the split's end (padding) are dropped."""
        take = min(len(scores), len(self.labels) - self.seen)
        if take <= 0:
            return False
        got = np.asarray(labels[:take]).astype(np.int64)
        want = self.labels[self.seen : self.seen + take]
        if not np.array_equal(got, want):
            raise DataError(
                f"the {self.split} loader's labels for records {self.seen}-"
                f"{self.seen + take - 1} are not those of the file, in file order",
                "report this: the evaluation loader must read the split unshuffled.",
            )
        top = np.argsort(-np.asarray(scores[:take], dtype=np.float64), axis=1, kind="stable")
        self._tops.append(top[:, : self.k])
        self.seen += take
        return not self.done

    def result(self) -> Evaluation:
        if not self.done:
            raise DataError(
                f"the {self.split} loader ended after {self.seen} of {len(self.labels)} records",
                "check the split's .rec/.idx files (prepare them again).",
            )
        top = np.concatenate(self._tops) if self._tops else np.zeros((0, self.k), np.int64)
        return Evaluation(self.split, self.labels, top, self.num_classes)
