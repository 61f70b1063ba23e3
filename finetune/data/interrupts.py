"""How Ctrl-C reaches a parent that waits for worker processes: held back while they start,
taken as a flag while it waits (finetune.data.pack)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Hold SIGINT back (in this thread, and in processes and threads started meanwhile)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# How often a wait for the workers looks whether Ctrl-C was pressed: a tenth of a second is
# below what a person notices and costs nothing next to encoding an image.
POLL_S = 0.1


@contextmanager
def sigint_deferred() -> Iterator[Callable[[], bool]]:
    """Within the block Ctrl-C only sets a flag (ask the yielded function); on leaving it, the
    handler before is back and a press taken meanwhile raises KeyboardInterrupt.

    Why not let Ctrl-C raise where it lands: inside library code that holds or retakes a lock
    it breaks that code's own cleanup (multiprocessing's ``Condition.wait`` was left with its
    lock released, and its ``with`` failed with "RuntimeError: release unlocked lock" and a
    traceback instead of a clean stop). Outside the main thread signal
    handlers cannot be set; there the flag is never set and Ctrl-C is the caller's."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    taken: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: taken.append(signum))
    try:
        yield lambda: bool(taken)
    finally:
        signal.signal(signal.SIGINT, before)
    if taken:
        raise KeyboardInterrupt
