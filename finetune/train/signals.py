"""Stop requests: SIGTERM (SageMaker stop, spot interruption, `docker stop`) and SIGINT.

The handler only records the request; the training loop finishes its batch, writes a
checkpoint and returns (SageMaker's SIGKILL comes 120 s later). A second signal exits at once.
During start-up (``StopRequest(starting=True)`` until :meth:`StopRequest.started`) there is
nothing to save, so a signal raises :class:`StartupStopped` at once. How a stopped run says so
is the container's contract (finetune.contracts.container: EXIT_STOPPED, mark_stopped);
docs/training.md tells the whole story, the toolkit's lost pipe included.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


class StartupStopped(BaseException):
    """A stop signal during the trainer's start-up (``StopRequest(starting=True)``). A
    BaseException, as KeyboardInterrupt, so that no ``except Exception`` of the code being
    imported takes it for an error of its own."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class StopRequest:
    """Context manager that turns SIGTERM/SIGINT into a flag (``bool(stop)``) and restores
    the previous handlers on exit. Outside the main thread it installs nothing."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, starting: bool = False) -> None:
        """``starting``: from its handlers' installation until :meth:`started`, a stop signal
        raises StartupStopped at once (the trainer's start-up, above)."""
        self.signal_name: str | None = None
        self._previous: dict = {}
        self._starting = starting

    def started(self) -> None:
        """Start-up is over: from here a stop is a flag the training loop reads."""
        self._starting = False

    def __bool__(self) -> bool:
        return self.signal_name is not None

    def request(self, signal_name: str) -> None:
        """Stop as if ``signal_name`` had arrived here (another process of the run got it)."""
        if self.signal_name is None:
            self.signal_name = signal_name

    def _handle(self, signum, _frame) -> None:
        if self.signal_name is not None:
            raise SystemExit(128 + signum)
        self.signal_name = signal.Signals(signum).name
        if self._starting:
            self._starting = False
            raise StartupStopped(self.signal_name)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


class _LostPipeSafe:
    """A text stream whose reader may die: the first write to a broken pipe points the file
    descriptor at /dev/null, and the run goes on without its log instead of dying mid-stop."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def _guard(self, call, *args):
        try:
            return call(*args)
        except (BrokenPipeError, ValueError):  # ValueError: the stream was closed under us
            self._to_devnull()
            return None

    def _to_devnull(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        except (OSError, ValueError):
            pass
        finally:
            os.close(null)

    def write(self, text: str) -> int:
        self._guard(self._stream.write, text)
        return len(text)

    def flush(self) -> None:
        self._guard(self._stream.flush)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def survive_lost_output() -> None:
    """Keep training when whoever reads our stdout/stderr dies first. AWS's training toolkit
    reads the trainer's output through a pipe and has no SIGTERM handler: a SIGTERM to its
    process group kills it at once, and the trainer's next line (the one saying it stopped)
    would raise BrokenPipeError before the checkpoint was written."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _LostPipeSafe):
            setattr(sys, name, _LostPipeSafe(stream))
