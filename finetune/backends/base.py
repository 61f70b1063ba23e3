"""The one interface every backend implements, what each can do, and what launch asks of it.

A backend is a small plugin (SkyPilot's clouds are the model): it declares its capabilities,
owns an options model filled from the command line, turns a resource request into plan
Resources, reads a remote dataset's summary, runs its pre-flight (every check that writes
nothing to the cloud) and describes the plan for --dry-run; then it submits, reports status,
metrics and logs, and stops. Launch code asks these questions and never names a backend.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from finetune.errors import FinetuneError, UsageError

if TYPE_CHECKING:
    from finetune.contracts.metrics import EpochMetrics
    from finetune.plan import DatasetSummary, Plan, Resources
    from finetune.runs.run import Run


class Feature(enum.Enum):
    """What a launch may need of a backend (SkyPilot: CloudImplementationFeatures)."""

    SPOT = "spot capacity"
    MULTI_NODE = "several hosts"
    STOP = "stopping a run"


@dataclass(frozen=True)
class Capabilities:
    """Declared abilities: each missing feature maps to the reason a user is shown.
    ``offline_status``: status needs no network (a listing may refresh such runs freely).
    ``on_this_machine``: it trains on this machine, so its runs share these processors."""

    missing: dict[Feature, str] = field(default_factory=dict)
    offline_status: bool = False
    on_this_machine: bool = False

    def supports(self, feature: Feature) -> bool:
        return feature not in self.missing

    def check(self, backend: str, needed: set[Feature]) -> None:
        """Raise a UsageError listing every needed feature this backend lacks, with why."""
        gaps = [f for f in Feature if f in needed and f in self.missing]
        if not gaps:
            return
        what = "; ".join(f"{f.value}: {self.missing[f]}" for f in gaps)
        raise UsageError(
            f"the {backend} backend cannot provide {what}",
            "drop the option that asks for it, or pick a backend that has it "
            "(`finetune launch --help` lists them).",
        )


class ResourceRequest(BaseModel):
    """What the command line asks for, before a backend turns it into plan Resources."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance: str | None = None  # an instance type (cloud backends)
    count: int = 1  # hosts
    spot: bool = False

    @classmethod
    def of(cls, resources: Resources) -> ResourceRequest:
        """The request a planned run's resources answer (a sweep's cell, a resumed run)."""
        return cls(instance=resources.instance_type, count=resources.hosts, spot=resources.spot)

    def needs(self) -> set[Feature]:
        """The features this request asks for, whatever the backend."""
        needed = {Feature.SPOT} if self.spot else set()
        return needed | ({Feature.MULTI_NODE} if self.count > 1 else set())


class Options(BaseModel):
    """Base of a backend's options model: its fields are the launch flags it accepts
    (``subnet`` for --subnet), so the CLI hands them over by name and the model validates."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# Options under another name: inside Backend, ``Options`` is the class attribute
BackendOptions = Options


@dataclass(frozen=True)
class Hooks:
    """How a backend talks to the person launching: messages, and a byte progress bar
    (``progress(label, total) -> advance(n)``) for uploads."""

    notify: Callable[[str], None] = lambda message: None
    progress: Callable[[str, int], Callable[[int], None]] | None = None


@dataclass(frozen=True)
class Problem:
    """One thing that would stop a launch, and its fix."""

    what: str
    fix: str


class PreflightError(UsageError):
    """One or more pre-flight checks failed (every one found, each with its fix); nothing was
    uploaded or started. The same kind, and exit code, on every backend."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        if len(problems) == 1:
            super().__init__(f"Pre-flight check failed: {problems[0].what}", problems[0].fix)
            return
        what = "Pre-flight checks failed:\n" + "\n".join(
            f"  - {p.what} (to fix: {p.fix})" for p in problems
        )
        super().__init__(what, "fix each problem above, then launch again.")


@dataclass(frozen=True)
class Preflight:
    """A backend's answer before anything is created: the plan as it will be submitted (with
    its estimate), rows saying what runs where at what cost (for --dry-run), and ``error``:
    what would make the real launch fail (shown after the rows; None when it would go)."""

    plan: Plan
    rows: list[tuple[str, str]]
    title: str = "Backend"
    error: FinetuneError | None = None

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error


@dataclass(frozen=True)
class Event:
    """One line of a run's event log (``kind``: intent, image, attempt, relaunch, ...)."""

    kind: str
    message: str


@dataclass
class Journal:
    """What a backend has to tell the ledger about one run while it works: events, in order,
    and ledger columns it changed (backend_ref, the plan as submitted, region). Backends only
    note here; service/ is the one ledger writer. ``write`` (service's, at submit) takes each
    note as it comes, for what must be in the ledger before the backend's next step (EC2's
    launch intent, before RunInstances); without it the notes collect, and a status carries
    them back (Status.events, Status.facts)."""

    write: Callable[[Event | None, dict[str, Any]], None] | None = None
    events: list[Event] = field(default_factory=list)
    columns: dict[str, Any] = field(default_factory=dict)

    def event(self, kind: str, message: str) -> None:
        self.events.append(Event(kind, message))
        if self.write is not None:
            self.write(self.events[-1], {})

    def update(self, **columns: Any) -> None:
        self.columns.update(columns)
        if self.write is not None:
            self.write(None, columns)


@dataclass(frozen=True)
class Status:
    """A backend's view of a run: state is one of the ledger's statuses. service/ writes
    what it carries into the ledger (backends never open it)."""

    state: str  # submitted | running | stopping | completed | failed | stopped | interrupted
    reason: str | None = None
    detail: str | None = None  # e.g. SageMaker's secondary status
    started_at: float | None = None
    ended_at: float | None = None
    # What the backend measured for the ledger: columns (training_seconds, billable_seconds,
    # interrupted_seconds, hosts, region, charges: estimate.money.Charge dicts --
    # seconds, instances, prices paid and their sources, never euros) plus anything else
    # worth one "final" event (e.g. final_metrics). None: nothing beyond the state.
    facts: dict | None = None
    # What happened since the last look, in order (an attempt ended, a relaunch, instances
    # adopted); written once each, by whoever asked for the status.
    events: tuple[Event, ...] = ()

    @property
    def final(self) -> bool:
        return self.state in ("completed", "failed", "stopped", "interrupted")


@dataclass(frozen=True)
class Orphan:
    """Something a backend left in the cloud that no live run owns (for `finetune cleanup`)."""

    kind: str  # instance | spot-request | instance-profile | security-group | training-job ...
    id: str
    run_id: str
    age_s: float
    detail: str = ""
    owner: str = ""  # who launched it, where the backend can tell ("" : unknown)
    # why `cleanup` leaves it alone although no live run of this machine owns it (another
    # owner's, or not finetune's at all); "" when it may be removed
    skipped: str = ""


@dataclass(frozen=True)
class CleanupScope:
    """Whose leftovers `cleanup` may remove: those of runs in this machine's ledger
    (``known_runs``), of runs the caller names (``runs``), those tagged with ``owner`` when
    the caller names one (None: nobody's by tag alone); everyone's with ``all_owners``. An
    identity is not a machine: the caller's own runs launched elsewhere (a laptop, a CI box,
    a colleague on the same IAM user) may be live there, and are not this ledger's to end."""

    known_runs: frozenset[str] = frozenset()
    owner: str | None = None
    all_owners: bool = False
    runs: frozenset[str] = frozenset()  # named by the caller (--run): theirs to remove


class Backend(Protocol):
    name: str
    capabilities: ClassVar[Capabilities]
    Options: ClassVar[type[Options]]
    # the catalog price book (catalog.prices: ec2 | sagemaker) its runs are billed by and
    # estimated at; None: nothing is billed (this machine), so `finetune plan` skips it
    price_book: ClassVar[str | None]
    poll_seconds: float  # how often following asks for status (cloud APIs are rate limited)
    stream_logs: bool  # following prints the log text as it comes

    def resources(self, request: ResourceRequest) -> Resources:
        """Plan Resources for ``request`` (an instance's GPUs from the catalog, or devices
        here); raises a UsageError for what this backend cannot place."""

    def dataset_summary(self, uri: str) -> DatasetSummary:
        """The summary of a dataset already uploaded to ``uri`` (read from its manifest)."""

    def preflight(self, plan: Plan, history: Sequence[Any] = ()) -> Preflight:
        """Every check of a real launch that writes nothing (region, image, quota, budget);
        the plan as it will be submitted and rows for --dry-run. Raises what would fail.
        ``history``: the finished runs' measurements the caller read from the ledger (the
        estimate prefers them to the performance model); a backend never reads the ledger."""

    @property
    def options(self) -> BackendOptions | None:
        """The launch flags it was given (None: a run's stored options are read)."""

    @property
    def max_eur(self) -> float | None:
        """The launch's --max-eur, which the plan carries (None: none given, or a backend
        that bills nothing and takes no such flag)."""

    def __init__(
        self, options: BackendOptions | None = None, hooks: Hooks | None = None, poll_seconds=None
    ) -> None:
        """``options``: the launch flags (None: what the run stored); ``poll_seconds``: how
        often following asks for status (None: the backend's own default)."""

    def submit(self, plan: Plan, run: Run, journal: Journal | None = None) -> str:
        """Start the run; returns the backend's reference (pid, job name, instance ids).
        What the ledger should keep besides goes into ``journal`` (service/ writes it)."""

    def status(self, run: Run) -> Status:
        """Where the run is now."""

    def metrics(self, run: Run) -> list[EpochMetrics]:
        """Epoch events reported so far."""

    def logs(self, run: Run, offset: int = 0) -> tuple[str, int]:
        """Log text from byte ``offset`` on, and the next offset."""

    def stop(self, run: Run) -> None:
        """Ask the run to checkpoint and stop."""

    def fetch_model(self, run: Run, dest: Path) -> Path:
        """The completed run's model folder (classes.json, preprocessing.json,
        hyperparameters.json and the engine's files): where it already is on this machine,
        or downloaded from the cloud into ``dest`` (beside it first, then renamed)."""

    def tensorboard_location(self, run: Run) -> str | None:
        """Where the run's TensorBoard event files are kept (the tensorboard metric logger's
        /opt/ml/output/tensorboard): a folder on this machine or an s3:// prefix ending in
        '/'; None when this backend cannot tell (no record of where the run went). Asks no
        cloud API: the files may not exist yet."""

    def orphans(
        self, live_runs: set[str], older_than_s: float, scope: CleanupScope = CleanupScope()
    ) -> list[Orphan]:
        """What this backend left in the cloud that no live run owns (those outside
        ``scope`` with their ``skipped`` reason)."""

    def remove(self, orphans: list[Orphan]) -> list[str]:
        """Remove ``orphans``; one line per action."""
