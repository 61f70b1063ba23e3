"""Datasets whose counts are known before they are downloaded: what `plan` and a dry-run need
(images and classes) without the files, so "before you spend anything" includes the 1.2 GB
download.

Caltech-256's counts are fixed: the archive (256_ObjectCategories.tar, CaltechDATA record
nyy15-4j048; Griffin, Holub and Perona, 2007) holds 30,607 images in 257 folders, 827 of
them in 257.clutter; every class has at least 80, so `finetune prepare caltech256` (60
training images per class by default) always takes the same number for training and leaves
the rest for validation. A summary made here is labelled ``counts_only``: it estimates and
plans, it does not train.
"""

from __future__ import annotations

from finetune.plan.plan import DatasetSummary

CALTECH256_IMAGES = 30_607
CALTECH256_CLASSES = 257
CALTECH256_CLUTTER_IMAGES = 827
CALTECH256_TRAIN_PER_CLASS = 60  # `finetune prepare caltech256`'s default

KNOWN = ("caltech256",)


def counts_summary(name: str, path: str) -> DatasetSummary | None:
    """The summary of a known dataset not prepared at ``path`` yet, from its published
    counts (prepared with `finetune prepare`'s defaults); None for any other name."""
    if name != "caltech256":
        return None
    train = CALTECH256_CLASSES * CALTECH256_TRAIN_PER_CLASS
    return DatasetSummary(
        path=path,
        name=name,
        num_classes=CALTECH256_CLASSES,
        train_count=train,
        val_count=CALTECH256_IMAGES - train,
        image_side=None,
        manifest_sha256="",
        rec_sha256={},
        counts_only=True,
    )


def given_counts(images: int, classes: int) -> DatasetSummary:
    """A dataset known only by the counts given on the command line (`plan --images N
    --classes K`): N training images an epoch, K classes."""
    return DatasetSummary(
        path="",
        name="counts",
        num_classes=classes,
        train_count=images,
        val_count=0,
        image_side=None,
        manifest_sha256="",
        rec_sha256={},
        counts_only=True,
    )


def note(dataset: DatasetSummary) -> str:
    """What a counts-only summary is, in one line ("" for a prepared dataset)."""
    if not dataset.counts_only:
        return ""
    if dataset.name == "counts":
        return "planned from the counts given (--images, --classes); no dataset read"
    return (
        f"{dataset.name} not prepared yet: its published counts (`finetune prepare "
        f"{dataset.name}` makes it)"
    )
