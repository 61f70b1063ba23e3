"""Files and folders finetune writes whole, and the folders it must never replace.

A file is written to a temporary name beside it, fsynced, then renamed over it
(``write_atomic``), so a reader sees the old file or the new one, never half of one.

A folder finetune publishes (an exported model, a cloud run's model in the cache) is filled
in a temporary sibling and renamed into place only when complete, so a folder that exists is
whole. Replacing one moves the old folder aside, renames the new one in, and only then
removes the old one; a failure before that puts the old one back, so a failed write leaves
what was there as it was. Nothing here deletes a folder it did not create or move aside
itself, and a caller decides (``check_old``) whether an existing folder may be replaced.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from finetune.errors import UsageError


class Occupied(Exception):
    """``dest`` exists and the caller gave no ``check_old``: it is left alone."""


def publish(
    dest: Path, fill: Callable[[Path], None], check_old: Callable[[Path], None] | None = None
) -> Path:
    """Run ``fill(tmp)`` on an empty temporary folder beside ``dest``, then rename it to
    ``dest``. An existing ``dest`` is replaced only when ``check_old`` is given; it raises to
    refuse, and is asked before the work and again right before the swap (the folder may
    have changed meanwhile); without it an existing ``dest`` raises Occupied. Returns
    ``dest``. OSErrors propagate: the caller words them."""
    if dest.exists() or dest.is_symlink():
        if check_old is None:
            raise Occupied(dest)
        check_old(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        fill(tmp)
        _swap(tmp, dest, check_old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _swap(new: Path, dest: Path, check_old: Callable[[Path], None] | None) -> None:
    """Rename ``new`` to ``dest``; an old ``dest`` goes aside first and is removed last."""
    if not (dest.exists() or dest.is_symlink()):
        os.rename(new, dest)
        return
    if check_old is None:
        raise Occupied(dest)  # it appeared while the new one was being written
    check_old(dest)
    aside = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
    old = aside / "old"
    try:
        os.rename(dest, old)  # a rename never follows a link and never merges folders
    except BaseException:
        aside.rmdir()
        raise
    try:
        os.rename(new, dest)
    except BaseException:
        os.rename(old, dest)  # should this fail too, the old folder stays in ``aside``
        aside.rmdir()
        raise
    shutil.rmtree(aside, ignore_errors=True)  # only what was moved aside above


def refuse_protected(path: Path, option: str) -> None:
    """A UsageError when ``path`` is the file system's root, the home folder, the current
    folder, or a folder holding one of them: no command replaces those, whatever is in them.
    A pure path check: it touches nothing."""
    resolved = Path(os.path.abspath(path.expanduser())).resolve()
    protected = {"the file system's root": Path(resolved.anchor), "the current folder": Path.cwd()}
    with contextlib.suppress(RuntimeError):  # no HOME, no passwd entry: no home to protect
        protected["your home folder"] = Path.home()
    for what, place in protected.items():
        place = place.resolve()
        if resolved == place or resolved in place.parents:
            holds = "is" if resolved == place else "holds"
            raise UsageError(
                f"{option} {path} {holds} {what}: finetune never replaces it",
                f"give {option} a new folder of its own, e.g. {option} ./model-export.",
            )


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to a temporary name beside ``path``, fsync, then rename over it. The
    temporary name is unpredictable and created exclusively (O_EXCL: never an existing file or
    a planted symlink, which a shared folder's other users could aim elsewhere); the rename
    replaces ``path`` itself, never what a symlink there points to. A file keeps its mode; a
    new one gets the usual (umask) mode."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def _mode_for(path: Path) -> int:
    """``path``'s own permission bits, or 0o666 less the process's umask for a new file."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    try:  # Linux says the umask without changing it
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


def fsync_dir(directory: str | Path) -> None:
    """Flush a folder's entries (a rename, a new file) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Below this much free space a file system refused a write for want of room: a writer that
# fails on a full disk has filled it to its last blocks (SQLite's pages are 4 KiB each).
NO_ROOM_BYTES = 64 * 1024


def no_room(path: str | Path) -> bool:
    """Whether the file system holding ``path`` (a folder, or a file's folder) is full."""
    folder = Path(path)
    folder = folder if folder.is_dir() else folder.parent
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < NO_ROOM_BYTES
