"""The one interface every backend implements, and what each can do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from finetune.metrics import EpochMetrics
    from finetune.plan import Plan
    from finetune.runs.ledger import Run


@dataclass(frozen=True)
class Capabilities:
    """Declared abilities, checked before anything is submitted (SkyPilot style)."""

    spot: bool = False
    multi_node: bool = False
    gpus: bool = True
    stop: bool = True


@dataclass(frozen=True)
class Status:
    """A backend's view of a run: state is one of the ledger's statuses."""

    state: str  # submitted | running | stopping | completed | failed | stopped | interrupted
    reason: str | None = None
    detail: str | None = None  # e.g. SageMaker's secondary status
    started_at: float | None = None
    ended_at: float | None = None
    # What the backend measured for the ledger: columns (training_seconds, billable_seconds,
    # interrupted_seconds, instance_count, region, charges: report.money.Charge dicts --
    # seconds, instances, prices paid and their sources, never euros) plus anything else
    # worth one "final" event (e.g. final_metrics). None: nothing beyond the state.
    facts: dict | None = None

    @property
    def final(self) -> bool:
        return self.state in ("completed", "failed", "stopped", "interrupted")


class Backend(Protocol):
    name: str
    capabilities: Capabilities

    def submit(self, plan: Plan, run: Run) -> str:
        """Start the run; returns the backend's reference (pid, job name, instance ids)."""

    def status(self, run: Run) -> Status:
        """Where the run is now."""

    def metrics(self, run: Run) -> list[EpochMetrics]:
        """Epoch events reported so far."""

    def logs(self, run: Run, offset: int = 0) -> tuple[str, int]:
        """Log text from byte ``offset`` on, and the next offset."""

    def stop(self, run: Run) -> None:
        """Ask the run to checkpoint and stop."""
