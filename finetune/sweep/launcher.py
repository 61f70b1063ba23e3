"""The one place a sweep starts, follows and resumes runs: the library calls `finetune launch`
uses (finetune.service)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # service (and a backend's SDK) is imported when a cell is launched
    from finetune.runs.run import Run


def backend_for(name: str):
    """The backend a sweep launches every cell on (its default options)."""
    from finetune.backends import default_backend

    return default_backend(name)


def launch_cell(plan, backend, ledger, sweep_id: str, cell) -> Run:
    """Record and submit one cell's run, tagged with the sweep and the cell from the start."""
    from finetune import service

    columns = {"sweep_id": sweep_id, "sweep_cell": cell.key, "sweep": dict(cell.values)}
    return service.launch(plan, backend, ledger, columns)


def sync(run, backend, ledger):
    """Ask the backend where ``run`` is and record it; returns (run, status)."""
    from finetune import service

    run, status, _ = service.sync(run, backend, ledger)
    return run, status
