"""`export` and `predict` show a spinner on a terminal while the engine loads (a real
pseudo-terminal, the real CLI in a subprocess), and add nothing to a pipe."""

from __future__ import annotations

import os
import pty
import subprocess
import sys


def _on_a_terminal(*args: str) -> str:
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "finetune", *args], stdin=follower,
                            stdout=follower, stderr=follower, env=env)  # fmt: skip
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
    proc.wait(timeout=60)
    os.close(leader)
    return out.decode(errors="replace")


def test_export_shows_a_spinner_on_a_terminal():
    shown = _on_a_terminal("export", "ft-no-such-run")
    assert "Exporting ft-no-such-run's model" in shown and "no run 'ft-no-such-run'" in shown
    # (on a pipe nothing is added: the predict tests parse its --format json output whole)
