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
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_CTRL_C = 128 + signal.SIGINT  # what a shell reports for a command Ctrl-C ended


class Presses:
    """Ctrl-C presses within ``ctrl_c_taken()``. A press is noted; ``wait`` raises
    KeyboardInterrupt for it. It raises where the program is only while ``following`` (a
    second press while the first waits: a request that hangs) or ``asking``."""

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
        deadline = time.monotonic() + seconds
        while True:
            self._drain()
            if self._pending:
                self._pending = 0
                raise KeyboardInterrupt
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._wakeup is None:
                time.sleep(left)
                return
            select.select([self._wakeup], [], [], left)

    @contextmanager
    def following(self) -> Iterator[None]:
        """While a poll runs: a second press before the first was acted on (a request that
        hangs) raises at once. The live display is torn down after this, presses only noted."""
        with self._raising_after(2):
            yield

    @contextmanager
    def asking(self) -> Iterator[None]:
        """While a question waits for its answer (an input() a noted press would not end),
        a press raises at once; presses before it was asked are forgotten."""
        self._drain()
        self._pending = 0
        with self._raising_after(1):
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
