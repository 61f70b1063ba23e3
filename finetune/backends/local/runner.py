"""Supervisor of one local run: starts the trainer, forwards stop signals, records the end.

    python -m finetune.backends.local.runner RUN_DIR

Runs detached from the terminal (its own session), so a `launch --detach` or a closed
terminal does not end the training. It writes RUN_DIR/runner.json when it starts and
RUN_DIR/exit.json (atomically) when the trainer ends: exit code, times, and whether a stop
was requested. The trainer's output goes to RUN_DIR/train.log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from finetune.data.manifest import write_atomic


def main(run_dir: Path) -> int:
    env = dict(os.environ, FINETUNE_ML_ROOT=str(run_dir / "ml"), PYTHONUNBUFFERED="1")
    with open(run_dir / "train.log", "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "finetune.train"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    started = time.time()
    write_atomic(
        run_dir / "runner.json",
        json.dumps({"runner_pid": os.getpid(), "trainer_pid": child.pid, "started_at": started}),
    )
    stop = {"requested": False}

    def forward(signum, frame):  # the trainer checkpoints on SIGTERM and exits
        stop["requested"] = True
        child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    write_atomic(
        run_dir / "exit.json",
        json.dumps(
            {
                "exit_code": code,
                "started_at": started,
                "ended_at": time.time(),
                "stop_requested": stop["requested"],
            }
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
