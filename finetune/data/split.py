"""Seeded train/validation splits, per class, independent of the number of classes.

Each class is shuffled with its own generator seeded by (seed, class name), so adding or
removing a class never changes another class's split, and the same seed gives the same
split on every machine and Python version (random.Random seeds from a str via SHA-512).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from finetune.errors import DataError


@dataclass(frozen=True)
class SplitSpec:
    """Either a fixed number of training images per class or a validation ratio."""

    seed: int = 0
    train_per_class: int | None = None
    val_ratio: float | None = None

    def describe(self) -> str:
        if self.train_per_class is not None:
            return f"{self.train_per_class} training images per class, the rest for validation"
        return f"{self.val_ratio:.0%} of each class for validation"


def shuffled(items: list, seed: int, salt: str) -> list:
    """A copy of ``items`` in a reproducible order determined by (seed, salt)."""
    out = list(items)
    random.Random(f"{seed}:{salt}").shuffle(out)
    return out


def split_class(cls: str, items: list[str], spec: SplitSpec) -> tuple[list[str], list[str]]:
    """Split one class's items (in listing order) into (train, val)."""
    order = shuffled(items, spec.seed, cls)
    if spec.train_per_class is not None:
        n_train = spec.train_per_class
    else:
        n_val = round(len(order) * float(spec.val_ratio or 0.0))
        if spec.val_ratio and len(order) > 1:
            n_val = max(n_val, 1)  # every class keeps at least one validation image
        n_train = len(order) - n_val
    return order[:n_train], order[n_train:]


def check_class_sizes(samples: dict[str, list[str]], spec: SplitSpec) -> None:
    """Raise DataError when a class cannot give ``train_per_class`` images plus validation."""
    if spec.train_per_class is None:
        return
    short = {c: len(v) for c, v in samples.items() if len(v) <= spec.train_per_class}
    if short:
        smallest = min(short.values())
        shown = ", ".join(f"{c} ({n})" for c, n in list(short.items())[:8])
        raise DataError(
            f"{len(short)} class(es) have no more than --train-per-class "
            f"{spec.train_per_class} usable images, leaving nothing to validate on: {shown}",
            f"lower --train-per-class below {smallest}, use --val-ratio instead, or add images.",
        )


def validate_spec(spec: SplitSpec) -> None:
    """Raise DataError for an impossible split specification."""
    if (spec.train_per_class is None) == (spec.val_ratio is None):
        raise DataError(
            "give exactly one of --train-per-class and --val-ratio",
            "pass --train-per-class N (Caltech protocol) or --val-ratio 0.2.",
        )
    if spec.train_per_class is not None and spec.train_per_class < 1:
        raise DataError("--train-per-class must be at least 1", "pass a positive number.")
    if spec.val_ratio is not None and not 0.0 < spec.val_ratio < 1.0:
        raise DataError("--val-ratio must be between 0 and 1", "pass e.g. --val-ratio 0.2.")
