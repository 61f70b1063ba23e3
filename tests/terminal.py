"""The real CLI on a pseudo-terminal: what a person at a terminal sees, whole."""

from __future__ import annotations

import os
import pty
import subprocess
import sys


def cli_on_a_terminal(args: list[str], timeout: float = 60, **env: str) -> str:
    """Run `finetune ARGS` in a subprocess whose stdin, stdout and stderr are a terminal
    (100 columns); everything it drew, until it closed the terminal."""
    return run_on_a_terminal(args, timeout, **env)[1]


def run_on_a_terminal(args: list[str], timeout: float = 60, **env: str) -> tuple[int, str]:
    """As cli_on_a_terminal, with the command's exit status first."""
    leader, follower = pty.openpty()
    environ = {**os.environ, "COLUMNS": "100", "TERM": "xterm", **env}
    proc = subprocess.Popen([sys.executable, "-m", "finetune", *args], stdin=follower,
                            stdout=follower, stderr=follower, env=environ)  # fmt: skip
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    code = proc.wait(timeout=timeout)
    os.close(leader)
    return code, out.decode(errors="replace")
