"""An exclusive, non-blocking lock on a file in the output folder (one `prepare` at a time).

Our own flock rather than filelock's: the caller gets the descriptor, so encoding workers
(forked while the lock is held) can close their inherited copy. A flock belongs to the open
file description, so a worker that kept the copy would keep the lock after the parent ended.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Busy(Exception):
    """Another process holds the lock."""


@contextmanager
def exclusive(path: Path) -> Iterator[int]:
    """Hold an exclusive flock on ``path`` (created if missing); yields its descriptor."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(str(path)) from None
        yield fd
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
