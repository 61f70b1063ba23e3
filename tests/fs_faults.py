"""Run `finetune` on a read-only or a full file system, for real.

Permission bits do not stop root, so tests make the real thing: a private mount namespace
(`unshare --user --map-root-user --mount`, no privileges needed) in which a folder is
re-mounted read-only, or replaced by a tiny tmpfs that is then filled up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

READ_ONLY = 'mount --bind "$D" "$D" && mount -o remount,ro,bind "$D" "$D"'
FULL = 'mount -t tmpfs -o size=256k none "$D" && (head -c 1048576 /dev/zero > "$D/filler" || true)'


def finetune_in(
    setup: str, folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m finetune ARGS` after ``setup`` (READ_ONLY or FULL) made ``folder`` so."""
    script = f'{setup} && exec "$@"'
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh"]
    return subprocess.run(
        [*cmd, sys.executable, "-m", "finetune", *args],
        env={**os.environ, **(env or {}), "D": str(folder)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_clear_error(res: subprocess.CompletedProcess, code: int, *phrases: str) -> None:
    """A message with the phrases and a fix, the exit code, and no traceback."""
    out = res.stdout + res.stderr
    assert res.returncode == code, out
    assert "Traceback" not in out and "To fix:" in out, out
    for phrase in phrases:
        assert phrase in out, out
