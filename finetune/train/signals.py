"""Stop requests: SIGTERM (SageMaker stop, spot interruption, `docker stop`) and SIGINT.

The handler only records the request; the training loop looks at it after every batch,
finishes that batch, writes a checkpoint and returns. SageMaker sends SIGKILL 120 s after
SIGTERM, far more than one batch and one checkpoint need. The entrypoint installs it before
anything slow happens, so a stop during start-up is honoured too; a second signal exits at
once (an impatient Ctrl-C).
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
