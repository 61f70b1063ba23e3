"""A folder-per-class image set becomes (classes, samples) in one small function."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from finetune.data.utf8names import check_utf8, escaped
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


def list_images(
    root: str | Path, exclude: tuple[str, ...] = (), skip: tuple[Path, ...] = ()
) -> Listing:
    """List the images under each class folder of ``root`` (recursively, natural order).

    Hidden entries are skipped silently; files without an image extension are skipped and
    reported in ``ignored``. Symlinked folders are followed only when they lead to a folder
    inside ``root`` (not ``root`` itself, nor one already walked), and a file reached twice
    is listed once; folders in ``skip`` (an output folder inside ``root``) are left out.
    Raises DataError for a missing or empty root, unreadable class folders, empty classes
    and file names with a tab or newline (all of them named).
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(
            f"image folder {root} does not exist or is not a directory",
            "pass the folder that holds one sub-folder per class.",
        )
    walk = _Walk(root, skip)
    dirs = walk.class_dirs()
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
    check_utf8(classes, "class folder")
    _check_class_names(classes)
    walk.own(classes)
    # real folders first: a class folder that is a link to another is the one left empty
    found = {cls: walk.images(cls) for cls in sorted(classes, key=lambda c: walk.is_link(c))}
    samples = {cls: found[cls] for cls in classes}
    empty = [c for c in classes if not samples[c]]
    if empty:
        shown = ", ".join(empty[:10]) + (" ..." if len(empty) > 10 else "")
        why = "".join(f"\n  {line}" for c in empty[:10] if (line := walk.why_empty(c)))
        raise DataError(
            f"{len(empty)} class folder(s) hold no images: {shown}{why}",
            "add images to them, delete them (or the link), or leave them out with --exclude NAME.",
        )
    check_utf8([rel for cls in classes for rel in samples[cls]], "image file")
    _check_names([rel for cls in classes for rel in samples[cls]])
    ignored = [(escaped(rel), why) for rel, why in walk.ignored]  # (stored as UTF-8 text)
    return Listing(root, classes, samples, ignored)


# Bidirectional overrides, embeddings, isolates and marks: a class name holding one prints as
# another in every report (RIGHT-TO-LEFT OVERRIDE makes "gpj.exe" read "exe.jpg").
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def _check_class_names(classes: list[str]) -> None:
    """Class names are shown in every report and stored in the manifest: none may hold a
    control or bidi character, and no two may be the same text in different Unicode forms
    (école in NFC and in NFD are two folders that print the same)."""
    import unicodedata

    bad = [c for c in classes if any(ch in _BIDI or unicodedata.category(ch) == "Cc" for ch in c)]
    if bad:
        shown = ", ".join(ascii(c) for c in bad[:10])
        raise DataError(
            f"{len(bad)} class folder name(s) hold control or text-direction characters, which "
            f"would make reports show one name as another: {shown}",
            "rename those folders to plain names (or leave them out with --exclude NAME).",
        )
    forms: dict[str, list[str]] = {}
    for c in classes:
        forms.setdefault(unicodedata.normalize("NFC", c), []).append(c)
    twins = [names for names in forms.values() if len(names) > 1]
    if twins:
        shown = "; ".join(" and ".join(ascii(n) for n in names) for names in twins[:10])
        raise DataError(
            f"{len(twins)} class name(s) exist as several folders whose names differ only in "
            f"Unicode normalization (they print the same but would be different classes): "
            f"{shown}",
            "move the images of each pair into one folder and delete the other (e.g. keep the "
            "NFC name), then run again.",
        )


def _check_names(rels: list[str]) -> None:
    """The .lst format is tab-separated, one image a line: such names cannot be stored."""
    bad = [rel for rel in rels if "\t" in rel or "\n" in rel or "\r" in rel]
    if bad:
        shown = "\n".join(f"  {rel!r}" for rel in bad[:20])
        more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise DataError(
            f"{len(bad)} image file name(s) contain a tab or line break, which the .lst "
            f"format cannot hold:\n{shown}{more}",
            "rename those files (or move them out of the image folder) and run again.",
        )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class _Walk:
    """One listing's walk: remembers the real folders walked and the real files listed."""

    def __init__(self, root: Path, skip: tuple[Path, ...]) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.skip = {os.path.realpath(p) for p in skip}
        self.walked: set[str] = set()
        self.files: dict[str, str] = {}  # real path -> the relative path listed for it
        self.ignored: list[tuple[str, str]] = []
        self.owners: dict[str, str] = {}  # real path of a class folder -> its class

    def own(self, classes: list[str]) -> None:
        """Every class folder owns its images: a link inside another class that leads into it
        is not followed (its images would be listed under the wrong label)."""
        for cls in classes:
            if not self.is_link(cls):
                self.owners[os.path.realpath(self.root / cls)] = cls

    def is_link(self, cls: str) -> bool:
        return os.path.islink(self.root / cls)

    def why_empty(self, cls: str) -> str:
        """Why class ``cls`` was found empty, when a link is the reason ('' otherwise)."""
        if self.is_link(cls):
            target = os.path.realpath(self.root / cls)
            owner = self._owner(target)
            where = f"the class folder {owner}" if owner else target
            return f"{cls} is a link to {where}, whose images are listed there"
        links = [(rel, why) for rel, why in self.ignored if rel.startswith(cls + "/")]
        return "; ".join(f"{rel}: {why}" for rel, why in links[:3] if "link" in why)

    def _foreign(self, real: str, cls: str | None) -> str | None:
        """The other class whose folder holds ``real``, reached from inside class ``cls``
        (None: none, or ``cls`` is itself a link: its own images are all duplicates)."""
        if cls is None or self.is_link(cls):
            return None
        owner = self._owner(real)
        return owner if owner != cls else None

    def _owner(self, real: str) -> str | None:
        """The class whose folder holds ``real`` (None: no class folder does)."""
        return next((c for folder, c in self.owners.items() if _inside(real, folder)), None)

    def class_dirs(self) -> list[str]:
        """Names of the class folders; unreadable ones (a symlink loop) are an error."""
        dirs, broken = [], []
        for e in sorted(os.scandir(self.root), key=lambda e: e.name):
            if e.name.startswith("."):
                continue
            try:
                is_dir = e.is_dir()
            except OSError as exc:  # ELOOP: a symlink loop; EACCES
                broken.append(f"{e.name} ({exc.strerror or exc})")
                continue
            if is_dir and self._followable(e.path, e.name):
                dirs.append(e.name)
        if broken:
            raise DataError(
                f"class folder(s) in {self.root} cannot be read: {', '.join(broken)}",
                "repair or remove those entries (a symlink must lead to a folder), then run again.",
            )
        return dirs

    def _followable(self, path: str, rel: str, cls: str | None = None) -> bool:
        """Whether to walk the folder at ``path`` (inside class ``cls``); records why not in
        ``ignored``."""
        real = os.path.realpath(path)
        why = None
        owner = self._foreign(real, cls)
        if real in self.skip:
            why = "the output folder (inside the image folder)"
        elif not _inside(real, self.real_root) or real == self.real_root:
            why = "a link to a folder outside the image folder (or to the image folder itself)"
        elif owner:
            why = f"a link into the class folder {owner} (its images are labelled {owner})"
        elif real in self.walked:  # a loop, or a second way to the same folder
            why = "a link to a folder that is already listed"
        if why:
            self.ignored.append((rel, f"folder not followed: {why}"))
            return False
        return True

    def images(self, cls: str) -> list[str]:
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root / cls, followlinks=True):
            self.walked.add(os.path.realpath(dirpath))
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            keep = []
            for d in sorted(x for x in dirnames if not x.startswith(".")):
                if self._followable(os.path.join(dirpath, d), f"{rel_dir}/{d}", cls):
                    keep.append(d)
                    self.walked.add(os.path.realpath(os.path.join(dirpath, d)))
            dirnames[:] = keep
            for name in filenames:
                if not name.startswith("."):
                    self._file(os.path.join(dirpath, name), f"{rel_dir}/{name}", found, cls)
        return sorted(found, key=natural_key)

    def _file(self, path: str, rel: str, found: list[str], cls: str) -> None:
        if os.path.splitext(path)[1].lower() not in IMAGE_EXTENSIONS:
            self.ignored.append((rel, "not an image file extension"))
            return
        real = os.path.realpath(path)
        owner = self._foreign(real, cls)
        if owner:  # one image, two labels: it is the class whose folder holds it
            self.ignored.append((rel, f"a link to an image of the class folder {owner}"))
            return
        if real in self.files:
            self.ignored.append((rel, f"the same file as {self.files[real]} (listed once)"))
            return
        self.files[real] = rel
        found.append(rel)
