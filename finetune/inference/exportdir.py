"""What makes a folder `finetune export`'s own: a marker file listing the files it wrote.

`export --overwrite` replaces a folder only when that marker lists every file in it, each
unchanged (same size and sha256): a folder holding anything else -- the user's files, a file
edited since, a sub-folder -- is someone else's, and is refused before anything is touched.
"""

from __future__ import annotations

import json
from pathlib import Path

from finetune import __version__
from finetune.data.manifest import sha256_file
from finetune.errors import UsageError

MARKER = ".finetune-export.json"


def seal(folder: Path, run_id: str | None) -> None:
    """Write the marker of a freshly filled export ``folder`` (its files, sizes, sha256)."""
    files = {
        p.name: {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(folder.iterdir())
        if p.name != MARKER
    }
    doc = {"written_by": "finetune export", "version": __version__, "run": run_id, "files": files}
    (folder / MARKER).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def check_replaceable(out: Path) -> None:
    """A UsageError unless ``out`` is a folder `finetune export` wrote, exactly as it left it."""
    if out.is_symlink() or not out.is_dir():
        kind = "a link" if out.is_symlink() else "a file" if out.is_file() else "not a folder"
        raise UsageError(
            f"--out {out} is {kind}, not a folder `finetune export` wrote: it is not replaced",
            "choose another --out (a new folder), or move that one away yourself.",
        )
    listed = _listed(out)
    if listed is None:
        raise UsageError(
            f"--out {out} was not written by `finetune export` (it has no readable {MARKER}): "
            "--overwrite replaces only an export folder, never other folders",
            "choose another --out (a new folder), or move that folder away yourself.",
        )
    foreign = sorted(p.name for p in out.iterdir() if p.name != MARKER and not _same(p, listed))
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        shown = ", ".join(foreign[:5]) + more
        raise UsageError(
            f"--out {out} holds files `finetune export` did not write (or that changed since): "
            f"{shown}; nothing was replaced",
            f"move those files out of {out} first, or choose another --out.",
        )


def _listed(out: Path) -> dict | None:
    """The marker's file table, or None when there is no readable marker."""
    marker = out / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        doc = json.loads(marker.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    files = doc.get("files") if isinstance(doc, dict) else None
    return files if isinstance(files, dict) and doc.get("written_by") == "finetune export" else None


def _same(path: Path, listed: dict) -> bool:
    entry = listed.get(path.name)
    if not isinstance(entry, dict) or path.is_symlink() or not path.is_file():
        return False
    return path.stat().st_size == entry.get("bytes") and sha256_file(path) == entry.get("sha256")
