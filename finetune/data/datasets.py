"""The library calls behind `finetune prepare`: one per kind of source."""

from __future__ import annotations

from pathlib import Path

from finetune.data.manifest import PrepareParams
from finetune.data.prepare import PrepareRequest, PrepareResult, Progress, prepare
from finetune.data.sources import ExtractLimits, resolve_caltech256

CLUTTER = "257.clutter"


def prepare_folder(
    root: Path,
    out: Path,
    name: str,
    params: dict,
    workers: int = 0,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> PrepareResult:
    """Prepare a folder-per-class image set into ``out`` (see finetune.data.prepare)."""
    req = PrepareRequest(Path(root), Path(out), name, PrepareParams(**params), workers, overwrite)
    return prepare(req, progress)


def prepare_caltech256(
    source: str | None,
    out: Path,
    downloads: Path,
    params: dict,
    train_per_class: int = 60,
    exclude_clutter: bool = False,
    sha256: str | None = None,
    name: str = "caltech256",
    workers: int = 0,
    overwrite: bool = False,
    progress: Progress | None = None,
    limits: ExtractLimits | None = None,
) -> PrepareResult:
    """Fetch (or find) Caltech-256 and prepare it with N training images per class.

    Non-image files (198.spider/RENAME2) are ignored and listed; empty nested folders
    (056.dog/greg/vision309) contribute nothing; 257.clutter is a class unless excluded.
    """
    resolved = resolve_caltech256(source, Path(downloads), sha256, progress, limits)
    exclude = (CLUTTER,) if exclude_clutter and (resolved.root / CLUTTER).is_dir() else ()
    p = PrepareParams(**{**params, "train_per_class": train_per_class, "exclude": exclude})
    req = PrepareRequest(resolved.root, Path(out), name, p, workers, overwrite, resolved.info)
    return prepare(req, progress)
