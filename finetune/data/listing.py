"""A folder-per-class image set becomes (classes, samples) in one small function."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from finetune.errors import DataError

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp"})


def natural_key(text: str) -> tuple:
    """Sort key that orders 'class2' before 'class10' (digits compare as numbers)."""
    return tuple(int(t) if t.isdigit() else t.casefold() for t in re.split(r"(\d+)", text))


@dataclass
class Listing:
    """Classes in label order and, per class, image paths relative to ``root`` (posix)."""

    root: Path
    classes: list[str]
    samples: dict[str, list[str]]
    ignored: list[tuple[str, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.samples.values())

    def fingerprint(self) -> str:
        """A cheap identity of the input set: paths, sizes and mtimes, hashed."""
        import hashlib

        h = hashlib.sha256()
        for cls in self.classes:
            for rel in self.samples[cls]:
                try:
                    st = (self.root / rel).stat()
                    h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
                except OSError:  # unreadable: encoding reports it; the name still counts
                    h.update(f"{rel}\0?\n".encode())
        return h.hexdigest()


def list_images(root: str | Path, exclude: tuple[str, ...] = ()) -> Listing:
    """List the images under each class folder of ``root`` (recursively, natural order).

    Hidden entries are skipped silently; files without an image extension are skipped and
    reported in ``ignored``. Raises DataError for a missing or empty root and empty classes.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(
            f"image folder {root} does not exist or is not a directory",
            "pass the folder that holds one sub-folder per class.",
        )
    dirs = [e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".")]
    unknown = sorted(set(exclude) - set(dirs))
    if unknown:
        raise DataError(
            f"--exclude names classes that are not in {root}: {', '.join(unknown)}",
            "use the class folder names exactly as they appear on disk.",
        )
    classes = sorted((d for d in dirs if d not in exclude), key=natural_key)
    if not classes:
        raise DataError(
            f"{root} has no class folders",
            "lay the images out as ROOT/<class name>/<image files>, one folder per class.",
        )
    samples: dict[str, list[str]] = {}
    ignored: list[tuple[str, str]] = []
    for cls in classes:
        samples[cls] = _walk_class(root, cls, ignored)
    empty = [c for c in classes if not samples[c]]
    if empty:
        shown = ", ".join(empty[:10]) + (" ..." if len(empty) > 10 else "")
        raise DataError(
            f"{len(empty)} class folder(s) hold no images: {shown}",
            "add images to them, delete them, or leave them out with --exclude NAME.",
        )
    return Listing(root, classes, samples, ignored)


def _walk_class(root: Path, cls: str, ignored: list[tuple[str, str]]) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root / cls, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        for name in filenames:
            if name.startswith("."):
                continue
            rel = f"{rel_dir}/{name}"
            if os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
                found.append(rel)
            else:
                ignored.append((rel, "not an image file extension"))
    return sorted(found, key=natural_key)
