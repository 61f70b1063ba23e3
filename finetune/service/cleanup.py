"""`finetune cleanup`: what the backends left in the cloud that no live run owns, and runs
whose launch died before any backend accepted them.

A run is live while the ledger says submitted, running or stopping -- except a run still
"submitted" with no backend reference, whose launching command (pid in its "submitting"
event) is gone from this host for longer than the grace period: that launch was abandoned
(e.g. killed right after RunInstances returned), so what it made is an orphan too.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field

from finetune.backends import NAMES, get_backend
from finetune.backends.base import CleanupScope, Orphan
from finetune.runs.ledger import Ledger
from finetune.runs.processes import alive
from finetune.runs.run import ACTIVE, Run

GRACE_S = 15 * 60  # a launch that has not heard back from its backend in this long is dead


@dataclass
class Found:
    orphans: dict[str, list[Orphan]] = field(default_factory=dict)  # by backend
    abandoned: list[Run] = field(default_factory=list)
    skipped: list[Orphan] = field(default_factory=list)  # not the caller's: each says why

    def __bool__(self) -> bool:
        return bool(self.abandoned) or any(self.orphans.values())


def find(
    ledger: Ledger,
    older_than_s: float,
    grace_s: float = GRACE_S,
    owner: str | None = None,
    all_owners: bool = False,
    runs: frozenset[str] = frozenset(),
) -> Found:
    """Orphans older than ``older_than_s`` of every backend (of a run this ledger knows
    ended: at any age), and the abandoned launches. Only this machine's (runs of this
    ledger) or named ones (``runs``, or tagged with ``owner``) are orphans; the others are
    listed as skipped, unless ``all_owners``."""
    known = ledger.list()
    abandoned = [r for r in known if is_abandoned(ledger, r, grace_s)]
    live = {r.id for r in known if r.status in ACTIVE} - {r.id for r in abandoned}
    scope = CleanupScope(frozenset(r.id for r in known), owner, all_owners, runs)
    found = Found(abandoned=abandoned)
    for name in NAMES:
        listed = get_backend(name).orphans(live, older_than_s, scope)
        found.skipped += [o for o in listed if o.skipped]
        if mine := [o for o in listed if not o.skipped]:
            found.orphans[name] = mine
    return found


def remove(ledger: Ledger, found: Found) -> list[str]:
    """Remove the orphans, then mark the abandoned runs failed; one line per action."""
    done = []
    for name, orphans in found.orphans.items():
        done += get_backend(name).remove(orphans)
    for run in found.abandoned:
        ledger.update(
            run.id,
            status="failed",
            ended_at=time.time(),
            exit_reason="abandoned: the launching command ended before the backend accepted "
            "the run; `finetune cleanup` removed what it had started",
        )
        done.append(f"marked {run.id} failed (abandoned launch)")
    return done


def is_abandoned(ledger: Ledger, run: Run, grace_s: float = GRACE_S, now=None) -> bool:
    """Submitted, never accepted, its launcher dead here, and older than the grace period."""
    if (
        run.status != "submitted"
        or run.backend_ref
        or run.created_at is None  # a damaged row: its age cannot tell
        or (now or time.time()) - run.created_at < grace_s
    ):
        return False
    launcher = _launcher(ledger, run)
    if not launcher or launcher.get("host") != socket.gethostname():
        return False  # launched elsewhere (or before launches were recorded): cannot tell
    try:
        pid = int(launcher.get("pid", 0))
    except (TypeError, ValueError):
        return False  # a damaged launch record: cannot tell, so never called abandoned
    return not alive(pid)


def _launcher(ledger: Ledger, run: Run) -> dict:
    for _, kind, message in reversed(ledger.events(run.id)):
        if kind == "submitting":
            try:
                found = json.loads(message)
            except (ValueError, RecursionError):
                return {}
            return found if isinstance(found, dict) else {}
    return {}
