"""The one place a sweep starts, follows and resumes runs: the library calls `finetune launch`
uses (finetune.service)."""

from __future__ import annotations

from finetune import service
from finetune.backends import default_backend
from finetune.runs.run import Run


def backend_for(name: str):
    """The backend a sweep launches every cell on (its default options)."""
    return default_backend(name)


def launch_cell(plan, backend, ledger, sweep_id: str, cell) -> Run:
    """Record and submit one cell's run, tagged with the sweep and the cell from the start."""
    columns = {"sweep_id": sweep_id, "sweep_cell": cell.key, "sweep": dict(cell.values)}
    return service.launch(plan, backend, ledger, columns)


def sync(run, backend, ledger):
    """Ask the backend where ``run`` is and record it; returns (run, status)."""
    run, status, _ = service.sync(run, backend, ledger)
    return run, status
