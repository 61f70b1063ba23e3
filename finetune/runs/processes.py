"""Whether a process is still there: one answer for the local backend (its supervisor and
trainer) and for `cleanup` (the pid of a launch that may have died)."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while process ``pid`` exists (a process of another user counts); a zombie child
    of this very process is reaped and counts as ended."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:  # not our child: it exists, and its parent reaps it
        return True
