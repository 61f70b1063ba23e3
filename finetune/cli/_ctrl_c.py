"""Ctrl-C while a command follows a run: every press is seen, at once, and acted on in our
own code, never lost in a sleep or raised inside a library's redraw.

Why not Python's own KeyboardInterrupt in ``time.sleep``: a press whose C-level handler runs
after the interpreter's last look for signals and before the sleep's system call begins (the
thread preempted there, as under load) is acted on only when the sleep ends, a whole poll
later (docs/decisions/170-ctrl-c-sleep-race.md). Here a press writes a byte into a pipe at C
level (``signal.set_wakeup_fd``) and the wait between two polls is a ``select`` on that pipe:
a press taken before the wait began still ends it at once.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_CTRL_C = 128 + signal.SIGINT  # what a shell reports for a command Ctrl-C ended


class Presses:
    """Ctrl-C presses within ``ctrl_c_taken()``. A press is noted; ``wait`` and
    ``read_line`` raise KeyboardInterrupt for it. It raises where the program is only while
    ``following`` (a second press while the first waits: a request that hangs)."""

    def __init__(self, wakeup: int | None) -> None:
        self._wakeup = wakeup  # the pipe's read end; None outside the main thread
        self._pending = 0  # presses not yet acted on
        self._raise_after = 0  # 0: only noted; n: the n-th pending press raises at once

    def _take(self, signum, frame) -> None:
        self._pending += 1
        if self._raise_after and self._pending >= self._raise_after:
            self._pending = 0
            raise KeyboardInterrupt

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``; KeyboardInterrupt at once when Ctrl-C is (or was) pressed."""
        self._until_readable(None, seconds)

    def forget(self) -> None:
        """Presses so far are forgotten (the question they asked for is about to be shown)."""
        self._drain()
        self._pending = 0

    def read_line(self) -> str:
        """A line typed on stdin; KeyboardInterrupt at once for a press, also one taken just
        before the read began (input() would then wait for Enter), EOFError at its end."""
        if self._wakeup is None:
            return input()
        self._until_readable(sys.stdin.fileno(), None)
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line

    def _until_readable(self, fd: int | None, seconds: float | None) -> None:
        """Until ``fd`` can be read or ``seconds`` passed (None: no limit), in a ``select``
        the wakeup pipe also ends: a pending or new press raises KeyboardInterrupt."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            self._drain()  # its loop runs the Python handler of each byte it reads
            if self._pending:
                self._pending = 0
                raise KeyboardInterrupt
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            if self._wakeup is None:
                time.sleep(left or 0)
                return
            watched = [self._wakeup] if fd is None else [self._wakeup, fd]
            if fd is not None and fd in select.select(watched, [], [], left)[0]:
                return

    @contextmanager
    def following(self) -> Iterator[None]:
        """While a poll runs: a second press before the first was acted on (a request that
        hangs) raises at once. The live display is torn down after this, presses only noted."""
        with self._raising_after(2):
            yield

    @contextmanager
    def _raising_after(self, n: int) -> Iterator[None]:
        self._raise_after = n
        try:
            yield
        finally:
            self._raise_after = 0

    def _drain(self) -> None:
        if self._wakeup is None:
            return
        try:
            while os.read(self._wakeup, 512):
                pass
        except BlockingIOError:
            pass


@contextmanager
def ctrl_c_taken() -> Iterator[Presses]:
    """Within the block Ctrl-C is a press noted by ``Presses`` (and a wake-up of its
    ``wait``), not a KeyboardInterrupt raised wherever the program is; on leaving, the
    handler and wake-up before are back. Outside the main thread signals are not ours to
    take, nor when Ctrl-C was ignored when we started (a shell's background job): ``wait``
    sleeps and Ctrl-C stays as it was."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield Presses(None)
        return
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    presses = Presses(read)
    before = signal.signal(signal.SIGINT, presses._take)
    wakeup_before = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    try:
        yield presses
    finally:
        signal.set_wakeup_fd(wakeup_before)
        signal.signal(signal.SIGINT, signal.SIG_DFL if before is None else before)
        os.close(read)
        os.close(write)
