"""Which files in a dataset folder `prepare` may replace: only the ones finetune wrote.

--out may name any folder. `prepare` writes NAME_{split}.{rec,idx,lst} and manifest.json
there; a file of one of those names that finetune did not write -- MXNet im2rec's output of
the same prefix, another tool's manifest.json -- is refused, with or without --overwrite.
finetune's own files are those its manifest lists and, while a publish is under way (the old
manifest gone, the new one not yet written), those its publish journal lists: a prepare
interrupted there can simply be run again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from finetune.data import manifest as mf
from finetune.errors import DataError
from finetune.files import fsync_dir, write_atomic

JOURNAL = ".prepare-publishing.json"
EXTENSIONS = (".rec", ".idx", ".lst")


def dataset_files(name: str, splits: list[str]) -> list[str]:
    """The data files `prepare` writes for dataset ``name`` (manifest.json aside)."""
    return [f"{name}_{split}{ext}" for split in splits for ext in EXTENSIONS]


def check_replaceable(out: Path, names: list[str]) -> None:
    """A DataError when writing ``names`` and manifest.json into ``out`` would replace a
    file finetune did not write there; touches nothing."""
    present = [n for n in [*names, mf.MANIFEST] if (out / n).exists() or (out / n).is_symlink()]
    if not present:
        return
    ours = _listed(out / JOURNAL, "finetune prepare")
    manifest = _listed(out / mf.MANIFEST, None)
    if manifest:
        ours |= manifest | {mf.MANIFEST}
    foreign = [n for n in present if n not in ours]
    if foreign:
        raise DataError(
            f"{out} already holds {', '.join(foreign)}, which no finetune manifest there "
            "lists: `prepare` would replace them, so it stops before writing anything",
            "choose another --out (or another --name), or move those files away yourself "
            "(e.g. the .rec/.idx/.lst of MXNet's im2rec, another tool's manifest.json).",
        )


def begin(out: Path, names: list[str]) -> None:
    """Record, before the first file is replaced, which files this publish writes."""
    doc = {"written_by": "finetune prepare", "files": [*names, mf.MANIFEST]}
    write_atomic(out / JOURNAL, json.dumps(doc))


def end(out: Path) -> None:
    """The manifest has landed: it lists the files now; the journal goes."""
    (out / JOURNAL).unlink(missing_ok=True)
    fsync_dir(out)


def _listed(path: Path, written_by: str | None) -> set[str]:
    """The file names a finetune manifest (``written_by`` None) or journal at ``path`` lists;
    empty when it is absent or not finetune's (a damaged manifest of ours still names its
    files: it is JSON with tool_version and a files table)."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 << 20:
        return set()
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return set()
    if not isinstance(doc, dict):
        return set()
    files = doc.get("files")
    if written_by is None:  # a manifest: files is a table name -> checksum
        ok = "tool_version" in doc and isinstance(files, dict)
    else:
        ok = doc.get("written_by") == written_by and isinstance(files, list)
    if not ok or not isinstance(files, dict | list):
        return set()
    return {f for f in files if isinstance(f, str) and os.sep not in f}
