"""Stop requests: SIGTERM (SageMaker stop, spot interruption, `docker stop`) and SIGINT.

The handler only records the request; the training loop looks at it after every batch,
finishes that batch, writes a checkpoint and returns. SageMaker sends SIGKILL 120 s after
SIGTERM, far more than one batch and one checkpoint need. The entrypoint installs it before
anything slow happens, so a stop during start-up is honoured too; a second signal exits at
once (an impatient Ctrl-C).

A stop that arrives while the trainer is still starting up (reading its job, importing its
engine: about 4 CPU-s for torch, torchvision and torch._dynamo on a CPU) has nothing to save:
no batch ran since the newest checkpoint. The entrypoint opens that phase with the handlers
(``StopRequest(starting=True)``) and the engine closes it (:meth:`StopRequest.started`) before
it writes anything, builds its session or starts other processes; a signal inside it raises
:class:`StartupStopped` at once, and the trainer exits as for any stop, with a marker that
says no checkpoint was written. Only a single process opens it: a worker that torchrun
started stops with the others.

A run that stopped this way is unfinished, and says so twice, so that every reader (the local
supervisor, the EC2 agent, SageMaker's FailureReason) can tell it from a finished run: the
trainer exits with ``EXIT_STOPPED`` (75, EX_TEMPFAIL: "try again", as the EC2 agent's own
interrupted exit) and leaves ``output/stopped.json`` (:func:`mark_stopped`) plus a failure
reason that starts with ``STOPPED_MARK``. Exit 0 means finished, with the model written.

A SIGTERM to the whole process group (``kill -TERM -PGID``) reaches the trainer and whatever
started it. Under AWS's training toolkit that parent has no handler and dies at once, taking
the pipe our output goes to: ``survive_lost_output`` turns the broken pipe into /dev/null, so
the trainer still finishes its batch, saves the checkpoint and exits as for any stop (75, tested
in tests/backends/sagemaker/test_toolkit_signals.py). Where no signal arrives at all (AWS's
image: a bash PID 1 that does not exec), the periodic checkpoint is what survives.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

EXIT_STOPPED = 75  # EX_TEMPFAIL: stopped by a signal after a checkpoint; start again to resume
STOPPED_MARK = "finetune-stopped"  # the first word of the reason a stopped trainer leaves
STOPPED_FILE = "stopped.json"  # in the /opt/ml/output folder, beside the failure file
# the files of a complete model folder (finetune.train.outputs writes hyperparameters.json last)
MODEL_FILES = ("classes.json", "preprocessing.json", "hyperparameters.json")


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


def stopped_file(ml_root: Path) -> Path:
    """Where a trainer stopped by a signal leaves its marker in an /opt/ml tree."""
    return Path(ml_root) / "output" / STOPPED_FILE


STARTING = "during start-up"  # mark_stopped's ``where`` for a stop before the first step


def mark_stopped(ml_root: Path, signal_name: str, where: str) -> str:
    """Leave the marker of a stop after a checkpoint (``where``: the position it saved, or
    STARTING: stopped before its first step, nothing new to save); returns the reason text,
    which also goes where SageMaker reads FailureReason from."""
    from finetune.files import write_atomic

    if where == STARTING:
        reason = (
            f"{STOPPED_MARK}: stopped by {signal_name} during start-up, before its first step "
            "(no new checkpoint: nothing had trained); the run is unfinished and resumes from "
            "its newest checkpoint, if any, when started again"
        )
    else:
        reason = (
            f"{STOPPED_MARK}: stopped by {signal_name} after a checkpoint ({where}); the run "
            "is unfinished and resumes from that checkpoint when started again"
        )
    doc = {"signal": signal_name, "where": where, "reason": reason, "time": time.time()}
    path = stopped_file(ml_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc) + "\n")
    return reason


def read_stopped(ml_root: Path) -> dict | None:
    """The stop marker of an /opt/ml tree, or None when the last trainer did not stop."""
    try:
        doc = json.loads(stopped_file(ml_root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def model_written(model_dir: Path) -> bool:
    """Whether a model folder is complete: a run is "completed" only with one."""
    return all((Path(model_dir) / name).is_file() for name in MODEL_FILES)


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
