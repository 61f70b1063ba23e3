"""Running a planned sweep: bounded parallelism (one at a time on this machine: runs side by
side would share its processors and falsify each other's throughput), and resumption.

Every run is recorded with the sweep id and its cell's identity from the moment it exists, so
running the same sweep again finds each cell's latest run in the ledger: completed cells are
not run again, running ones are followed, failed (or stopped, interrupted) ones are run again
only with ``retry_failed``. Ctrl-C leaves launched runs running; the next sweep follows them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from finetune.backends import on_this_machine
from finetune.errors import FinetuneError
from finetune.runs.run import ACTIVE, Run
from finetune.sweep import launcher
from finetune.sweep.cells import PlannedCell, SweepPlan

Event = Callable[[str, PlannedCell, object], None]  # (what, cell, run or message)


@dataclass
class SweepResult:
    """Which run each cell has now, and what this invocation did with it."""

    sweep_id: str
    runs: dict[str, Run] = field(default_factory=dict)  # cell key -> its latest run
    skipped: dict[str, str] = field(default_factory=dict)  # cell key -> why
    launched: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def incomplete(self) -> list[str]:
        """Cells without a completed run: failed now, or left failed (no --retry-failed)."""
        left = [k for k, why in self.skipped.items() if not why.startswith("done")]
        return [*self.failed, *left]


def latest_runs(ledger, cells: list[PlannedCell]) -> dict[str, Run]:
    """{cell key: its latest run in the ledger} for the cells that have one."""
    keys = {c.cell.key for c in cells}
    out: dict[str, Run] = {}
    for run in ledger.list():  # oldest first: later runs of a cell replace earlier ones
        if run.sweep_cell in keys:
            out[run.sweep_cell] = run
    return out


def run_sweep(
    sp: SweepPlan,
    ledger,
    *,
    parallel: int = 1,
    retry_failed: bool = False,
    on_event: Event | None = None,
    poll_seconds: float = 1.0,
) -> SweepResult:
    """Launch the cells that need it, at most ``parallel`` at a time, and follow every run
    until it ends; returns what each cell has."""
    say = on_event or (lambda what, cell, detail: None)
    limit = 1 if on_this_machine(sp.backend) else max(1, parallel)
    backend = launcher.backend_for(sp.backend)
    result = SweepResult(sp.sweep_id)
    queue, active = _triage(sp, ledger, retry_failed, result, say)
    while queue or active:
        while queue and len(active) < limit:
            cell = queue.pop(0)
            run = _launch(cell, sp, backend, ledger, result, say)
            if run is not None:
                active.append((cell, run))
        still = []
        for cell, run in active:
            run, status = launcher.sync(run, backend, ledger)
            result.runs[cell.cell.key] = run
            if status.final:
                if run.status != "completed":
                    result.failed.append(cell.cell.key)
                say("finished", cell, run)
            else:
                still.append((cell, run))
        active = still
        if active:
            time.sleep(poll_seconds)
    return result


def _triage(sp: SweepPlan, ledger, retry_failed: bool, result: SweepResult, say):
    """(cells to launch, (cell, run) pairs to follow) from what the ledger already holds."""
    found = latest_runs(ledger, sp.cells)
    queue, active = [], []
    for cell in sp.cells:
        run = found.get(cell.cell.key)
        if run is None:
            queue.append(cell)
            continue
        result.runs[cell.cell.key] = run
        if run.status == "completed":
            result.skipped[cell.cell.key] = f"done ({run.id})"
        elif run.status in ACTIVE:
            active.append((cell, run))
            say("following", cell, run)
        elif retry_failed:
            queue.append(cell)
        else:
            why = f"{run.status} ({run.id}): run again with --retry-failed"
            result.skipped[cell.cell.key] = why
        if cell.cell.key in result.skipped:
            say("skipped", cell, result.skipped[cell.cell.key])
    return queue, active


def _launch(cell, sp: SweepPlan, backend, ledger, result: SweepResult, say):
    """Launch one cell; a cell that cannot start is recorded failed and the sweep goes on."""
    try:
        run = launcher.launch_cell(cell.plan, backend, ledger, sp.sweep_id, cell.cell)
    except FinetuneError as exc:
        result.failed.append(cell.cell.key)
        say("failed to start", cell, str(exc).splitlines()[0])
        return None
    result.launched.append(cell.cell.key)
    result.runs[cell.cell.key] = run
    say("launched", cell, run)
    return run
