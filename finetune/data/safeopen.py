"""Opening the files a dataset manifest names: plain names inside the folder, regular files.

A manifest is data a user (or anyone who can write the folder or the S3 prefix) may edit. A
name such as ``../../../../dev/zero`` or ``/etc/shadow`` would make the checksum check read
outside the dataset, and a FIFO or a character device under a listed name would make it
block or read forever. So every listed name is checked to be a plain file name, and every
file is opened without blocking and checked to be a regular file before a byte is read.
Symbolic links to regular files are followed: a SageMaker-style channel links to the data.
"""

from __future__ import annotations

import io
import os
import re
import stat
from pathlib import Path

from finetune.errors import DataError

# a file name a manifest may list: what `prepare` writes (NAME_train.rec, NAME_val.idx ...)
PLAIN_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def plain_name_problem(name: str) -> str | None:
    """Why ``name`` is not a plain file name inside a folder (None when it is one)."""
    if PLAIN_NAME_RE.fullmatch(name) and name not in (".", ".."):
        return None
    return (
        f"{name!r} is not a plain file name (letters, digits, '.', '_', '-'; no folder, no "
        "absolute path, no '..')"
    )


def kind(mode: int) -> str:
    """'a FIFO (named pipe)', 'a folder' ... for a stat mode that is not a regular file."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def not_regular(path: str | Path, mode: int) -> DataError:
    return DataError(
        f"{path} is {kind(mode)}, not a regular file",
        "a prepared dataset holds only the regular files `finetune prepare` wrote: re-create "
        "it with `finetune prepare --overwrite`, or remove what replaced the file.",
    )


def open_regular(path: str | Path) -> io.BufferedReader:
    """Open ``path`` for reading in binary, refusing anything but a regular file. The open
    itself does not block (O_NONBLOCK: a FIFO swapped in after a stat cannot hang it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
