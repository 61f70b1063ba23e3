"""Seeded train/validation(/test) splits, per class, independent of the number of classes.

Each class is shuffled with its own generator seeded by (seed, class name), so adding or
removing a class never changes another class's split, and the same seed gives the same
split on every machine and Python version (random.Random seeds from a str via SHA-512).

Which image goes where: in a class's shuffled order the training images come first, the
held-out test images (when a test split is asked for) are the last ones, and validation
gets what lies between. So asking for a test split never changes the shuffle: with
--train-per-class the training images stay exactly the same and the test images come out
of the validation ones; with --val-ratio the training images are a prefix of those chosen
without a test split (the test images come out of the end of the order).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from finetune.errors import DataError


@dataclass(frozen=True)
class SplitSpec:
    """Either a fixed number of training images per class or a validation ratio, and
    optionally a held-out test split (a ratio or a number per class)."""

    seed: int = 0
    train_per_class: int | None = None
    val_ratio: float | None = None
    test_ratio: float | None = None
    test_per_class: int | None = None

    @property
    def has_test(self) -> bool:
        return self.test_ratio is not None or self.test_per_class is not None

    def describe(self) -> str:
        if self.train_per_class is not None:
            text = f"{self.train_per_class} training images per class, the rest for validation"
        else:
            text = f"{self.val_ratio:.0%} of each class for validation"
        if self.test_per_class is not None:
            text += f", {self.test_per_class} per class held out for test"
        elif self.test_ratio is not None:
            text += f", {self.test_ratio:.0%} of each class held out for test"
        return text


def class_counts(n: int, spec: SplitSpec) -> tuple[int, int, int]:
    """(train, val, test) image counts for a class of ``n`` usable images (may be < 1 when
    the class is too small: check_class_sizes reports that)."""
    n_test = 0
    if spec.test_per_class is not None:
        n_test = spec.test_per_class
    elif spec.test_ratio:
        n_test = max(round(n * spec.test_ratio), 1)  # a test split has an image of each class
    if spec.train_per_class is not None:
        return spec.train_per_class, n - spec.train_per_class - n_test, n_test
    n_val = round(n * float(spec.val_ratio or 0.0))
    if spec.val_ratio and n > 1:
        n_val = max(n_val, 1)  # every class keeps at least one validation image
    return n - n_val - n_test, n_val, n_test


def shuffled(items: list, seed: int, salt: str) -> list:
    """A copy of ``items`` in a reproducible order determined by (seed, salt)."""
    out = list(items)
    random.Random(f"{seed}:{salt}").shuffle(out)
    return out


def split_parts(
    cls: str, items: list[str], spec: SplitSpec
) -> tuple[list[str], list[str], list[str]]:
    """Split one class's items (in listing order) into (train, val, test); see the module
    docstring for which image goes where."""
    order = shuffled(items, spec.seed, cls)
    n_train, _, n_test = class_counts(len(order), spec)
    end_val = len(order) - n_test
    return order[:n_train], order[n_train:end_val], order[end_val:]


def split_class(cls: str, items: list[str], spec: SplitSpec) -> tuple[list[str], list[str]]:
    """Split one class's items (in listing order) into (train, val), without a test split."""
    train, val, _ = split_parts(cls, items, spec)
    return train, val


def check_class_sizes(samples: dict[str, list[str]], spec: SplitSpec) -> None:
    """Raise DataError when a class cannot give at least one training and one validation
    image (plus its test images)."""
    short = {}
    for cls, items in samples.items():
        n_train, n_val, _ = class_counts(len(items), spec)
        if n_train < 1 or n_val < 1:
            short[cls] = len(items)
    if not short:
        return
    smallest = min(short.values())
    shown = ", ".join(f"{c} ({n})" for c, n in list(short.items())[:8])
    more = f" and {len(short) - 8} more" if len(short) > 8 else ""
    if spec.train_per_class is not None and not spec.has_test:
        raise DataError(
            f"{len(short)} class(es) have no more than --train-per-class "
            f"{spec.train_per_class} usable images, leaving nothing to validate on: {shown}{more}",
            f"lower --train-per-class below {smallest}, use --val-ratio instead, or add images.",
        )
    raise DataError(
        f"{len(short)} class(es) are too small for this split ({spec.describe()}): each class "
        f"needs at least one training and one validation image: {shown}{more}",
        "ask for fewer training or test images (--train-per-class, --val-ratio, --test-ratio, "
        f"--test-per-class; the smallest class has {smallest} usable images), or add images.",
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
    if spec.test_ratio is not None and spec.test_per_class is not None:
        raise DataError(
            "give at most one of --test-ratio and --test-per-class",
            "pass --test-ratio 0.1 or --test-per-class N, not both.",
        )
    if spec.test_ratio is not None and not 0.0 < spec.test_ratio < 1.0:
        raise DataError("--test-ratio must be between 0 and 1", "pass e.g. --test-ratio 0.1.")
    if spec.test_per_class is not None and spec.test_per_class < 1:
        raise DataError("--test-per-class must be at least 1", "pass a positive number.")
    if (spec.val_ratio or 0.0) + (spec.test_ratio or 0.0) >= 1.0:
        raise DataError(
            f"--val-ratio {spec.val_ratio} and --test-ratio {spec.test_ratio} leave no images "
            "to train on",
            "keep their sum below 1, e.g. --val-ratio 0.2 --test-ratio 0.1.",
        )
