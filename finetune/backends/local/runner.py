"""Supervisor of one local run: starts the trainer, forwards stop signals, records the end.

    python -m finetune.backends.local.runner RUN_DIR [LOCK_FD]

Runs detached from the terminal (its own session), so a `launch --detach` or a closed terminal
does not end the training. It writes RUN_DIR/runner.json when it starts and RUN_DIR/exit.json
(atomically) when the trainer ends: exit code, times, and whether a stop was requested; the
trainer's output goes to RUN_DIR/train.log. Nothing of a run outlives its supervisor: the
trainer gets SIGTERM (it checkpoints and exits) the moment the supervisor dies, even by SIGKILL
(Linux's parent-death signal), and both hold the run's lock (take_lock) while either lives.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from finetune.files import write_atomic

LOCK_FILE = "run.lock"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def lock_held(run_dir: Path) -> bool:
    """Whether a process of this run (supervisor or trainer) is alive: it holds the lock."""
    path = Path(run_dir) / LOCK_FILE
    if not path.exists():
        return False
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def take_lock(run_dir: Path):
    """The run's lock (an open file), or None when a process of the run still holds it.
    Supervisor and trainer hold RUN_DIR/run.lock (one flock, shared through the inherited
    descriptor) for as long as either lives, so a resume cannot start a second trainer beside
    a live one. The backend takes it before it starts the supervisor and passes it on as
    LOCK_FD, so that of two resumes at once the loser is refused before it has started or
    changed anything."""
    lock = open(run_dir / LOCK_FILE, "a")  # noqa: SIM115 (held for the process's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def _die_with_parent(parent: int):
    """preexec_fn of the trainer: SIGTERM when the supervisor's thread ends (Linux)."""

    def arm() -> None:
        if sys.platform.startswith("linux"):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the signal was armed
            os._exit(1)

    return arm


@dataclass
class _Stop:
    """A stop signal and the trainer it is forwarded to (set from the signal handler)."""

    requested: bool = False
    child: subprocess.Popen[bytes] | None = None
    forwarded: bool = False


def main(run_dir: Path, lock_fd: int | None = None) -> int:
    """Supervise one attempt of the run; ``lock_fd``: the run's lock, already taken."""
    lock = take_lock(run_dir) if lock_fd is None else open(lock_fd, "a")  # noqa: SIM115
    if lock is None:
        print(f"another process of {run_dir} is alive (it holds {LOCK_FILE})", file=sys.stderr)
        return 3
    env = dict(os.environ, FINETUNE_ML_ROOT=str(run_dir / "ml"), PYTHONUNBUFFERED="1")
    env["FINETUNE_RUN_ID"] = run_dir.name  # (the metric loggers name their run after it)
    # before the trainer starts and runner.json names this process: a stop sent at once
    # is forwarded (or, before there is a trainer, handed to it on its start)
    stop = _Stop()

    def forward(signum, frame):  # the trainer checkpoints on SIGTERM and exits
        stop.requested = True
        if stop.child is not None:
            stop.forwarded = True
            stop.child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    with open(run_dir / "train.log", "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "finetune.train"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=(lock.fileno(),),  # the trainer holds the run's lock as long as it lives
            preexec_fn=_die_with_parent(os.getpid()),  # safe: no threads here yet
        )
    stop.child = child
    if stop.requested and not stop.forwarded:  # it came while the trainer started
        child.send_signal(signal.SIGTERM)
    started = time.time()
    write_atomic(
        run_dir / "runner.json",
        json.dumps({"runner_pid": os.getpid(), "trainer_pid": child.pid, "started_at": started}),
    )
    code = child.wait()
    write_atomic(
        run_dir / "exit.json",
        json.dumps(
            {
                "exit_code": code,
                "started_at": started,
                "ended_at": time.time(),
                "stop_requested": stop.requested,
            }
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None))
