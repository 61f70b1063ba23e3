"""Stop requests: SIGTERM (SageMaker stop, spot interruption, `docker stop`) and SIGINT.

The handler only records the request; the training loop looks at it after every batch,
finishes that batch, writes a checkpoint and returns. SageMaker sends SIGKILL 120 s after
SIGTERM, far more than one batch and one checkpoint need. The entrypoint installs it before
anything slow happens, so a stop during start-up is honoured too; a second signal exits at
once (an impatient Ctrl-C).

A SIGTERM to the whole process group (``kill -TERM -PGID``) reaches the trainer and whatever
started it. Under AWS's training toolkit that parent has no handler and dies at once, taking
the pipe our output goes to: ``survive_lost_output`` turns the broken pipe into /dev/null, so
the trainer still finishes its batch, saves the checkpoint and exits as for any stop (tested
in tests/backends/sagemaker/test_toolkit_signals.py). Where no signal arrives at all (AWS's
image: a bash PID 1 that does not exec), the periodic checkpoint is what survives.
"""

from __future__ import annotations

import signal
import threading


class StopRequest:
    """Context manager that turns SIGTERM/SIGINT into a flag (``bool(stop)``) and restores
    the previous handlers on exit. Outside the main thread it installs nothing."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict = {}

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
        import os

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
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _LostPipeSafe):
            setattr(sys, name, _LostPipeSafe(stream))
