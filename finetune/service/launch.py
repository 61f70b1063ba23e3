"""Launching and resuming runs: a request from the command line becomes a checked plan on a
backend (nothing written anywhere), then -- once the backend accepts it -- a run in the ledger.

The order follows SkyPilot's launch: the backend is chosen by name, the features the request
needs are checked against what the backend declares (once, here), the backend places the
resources and runs its pre-flight, and only then is anything recorded or created.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from finetune import settings
from finetune.backends import get_backend, implied
from finetune.backends.base import Backend, Feature, Hooks, Preflight, ResourceRequest
from finetune.contracts.record import launch_record
from finetune.errors import BusyError, DataError, FinetuneError, UsageError
from finetune.plan import Plan, build_plan, summarize_dataset
from finetune.runs.facts import measured_history
from finetune.runs.ledger import Ledger
from finetune.runs.run import ACTIVE, Run, new_run_id
from finetune.service.sync import journal, keep
from finetune.service.weights import check as check_weights
from finetune.service.weights import fetch as fetch_weights

REMOTE_SCHEMES = ("s3://",)  # a dataset already uploaded: the backend reads its summary


class LaunchRequest(BaseModel):
    """Everything `launch` was asked, before any backend has looked at it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str | None = None  # a name from finetune.backends.BACKENDS; None: the default
    recipe: str
    dataset: str | None = None
    overrides: tuple[str, ...] = ()
    resources: ResourceRequest = Field(default_factory=ResourceRequest)
    options: dict[str, Any] = Field(default_factory=dict)  # the backend's own flags, by name
    verify_checksums: bool = True


@dataclass(frozen=True)
class Planned:
    """A request checked by its backend: the backend, and its pre-flight answer."""

    backend: Backend
    preflight: Preflight
    weights: Any = None  # service.weights.WeightsPlan: what to fetch here before launching

    @property
    def plan(self):
        return self.preflight.plan


def check_features(backend: Backend, needed: set[Feature]) -> None:
    """The one place a launch asks whether the backend can do what it needs."""
    backend.capabilities.check(backend.name, needed)


def plan_launch(request: LaunchRequest, hooks: Hooks | None = None) -> Planned:
    """Every check a launch runs that writes nothing: backend name and options, capabilities,
    resources, dataset, recipe, and the backend's pre-flight. What `--dry-run` shows."""
    name, note = implied(request.backend, request.resources.instance)
    if note and hooks is not None:
        hooks.notify(note)
    backend = get_backend(name, request.options, hooks)
    check_features(backend, request.resources.needs())  # before the backend places anything
    resources = backend.resources(request.resources)
    dataset: Any = request.dataset
    if dataset and dataset.startswith(REMOTE_SCHEMES):
        dataset = backend.dataset_summary(dataset)
    plan = build_plan(
        request.recipe, dataset, resources, request.overrides, request.verify_checksums
    )
    cap = backend.max_eur  # checked by the backend's options model
    if cap is not None:
        plan = plan.model_copy(update={"max_eur": cap})
    weights = check_weights(plan, backend)  # before the pre-flight: a missing file stops here
    plan = plan.model_copy(update={"weights_from": weights.line})
    preflight = backend.preflight(plan, measured_history())  # read once, here, for the estimate
    if plan.dataset.counts_only and preflight.error is None:  # estimated; nothing to train on
        preflight = replace(preflight, error=_not_prepared(plan.dataset))
    return Planned(backend, preflight, weights)


def _not_prepared(dataset) -> DataError:
    return DataError(
        f"dataset {dataset.name} is not prepared yet (no manifest in {dataset.path}): the plan "
        "above uses its published counts",
        f"run `finetune prepare {dataset.name}` (it downloads and prepares the images), then "
        "launch again.",
    )


def start(request: LaunchRequest, ledger: Ledger, hooks: Hooks | None = None):
    """Plan and check the request, then launch it; returns (run, backend). A failed check
    leaves nothing behind: no ledger row, no run folder."""
    planned = plan_launch(request, hooks)
    planned.preflight.raise_if_failed()
    fetch_weights(planned.weights, hooks)
    return launch(planned.plan, planned.backend, ledger), planned.backend


def runs_dir() -> Path:
    return settings.get().data_dir / "runs"


def new_run(plan, backend_name: str, run_id: str, run_dir: Path) -> Run:
    """The ledger row for a new run of ``plan`` (not yet stored)."""
    r = plan.resources
    return Run(
        id=run_id,
        created_at=time.time(),
        recipe=plan.recipe.name,
        dataset=plan.dataset.path,
        backend=backend_name,
        status="submitted",
        plan=plan.model_dump(mode="json"),
        instance_type=r.instance_type,
        hosts=r.hosts,
        devices_per_host=r.devices_per_host,
        device_kind=r.device,
        spot=r.spot,
        run_dir=str(run_dir),
        record=launch_record(plan.dataset.manifest_sha256),
    )


def launch(plan, backend: Backend, ledger: Ledger, columns: dict | None = None) -> Run:
    """Record a new run and submit it. The row exists while the backend works (so a launch
    killed half-way is found again: see service.cleanup), but a submit the backend refused
    and fully undid takes it away again: the ledger holds only runs a backend accepted or
    may have. One whose undo left something (FinetuneError.left) stays, failed, saying what:
    `cleanup` removes what a run of this ledger left, and nothing of another machine's.
    ``columns``: more Run fields recorded from the start (a sweep's id and cell)."""
    check_features(backend, ResourceRequest.of(plan.resources).needs())  # a sweep's cell too
    run_id = new_run_id()
    run_dir = runs_dir() / run_id
    run_dir.mkdir(parents=True)
    run = ledger.create(replace(new_run(plan, backend.name, run_id, run_dir), **(columns or {})))
    ledger.add_event(run.id, "submitting", json.dumps(launcher()))
    try:
        ref = backend.submit(plan, run, journal(ledger, run.id))
    except FinetuneError as exc:
        if exc.left:
            why = f"launch failed: {exc.what}; AWS may still hold {'; '.join(exc.left)}"
            why += "; `finetune cleanup` removes what is left"
            ledger.update(run.id, status="failed", exit_reason=why, ended_at=time.time())
            raise
        ledger.delete(run.id)
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return ledger.update(run.id, backend_ref=ref, started_at=run.started_at or time.time())


def launcher() -> dict:
    """Who is launching: the pid and host that `cleanup` checks for a launch that died."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def resume(ledger: Ledger, run_id: str, hooks: Hooks | None = None):
    """Start a stopped, failed or interrupted run again from its last checkpoint, on the
    backend it ran on (with the options stored then); returns (run, backend)."""
    run = ledger.get(run_id)
    if run.problems:
        raise DataError(
            f"run {run.id} cannot be resumed: its record in the ledger is damaged "
            f"({'; '.join(run.problems)})",
            "launch a new run of the same recipe instead (`finetune runs show` lists what "
            "could be read).",
        )
    backend = get_backend(run.backend, hooks=hooks)
    # the backend's word, not the ledger's: a run recorded as interrupted may still have a
    # live process (a trainer whose supervisor was killed, checkpointing on its way out)
    state = run.status
    if run.backend_ref or state in ACTIVE:  # no ref: a launch killed before it heard back
        status = backend.status(run)
        keep(ledger, run, status)
        state = status.state
    if state in ACTIVE:
        raise UsageError(f"run {run.id} is still {state}", "wait for it, or stop it first.")
    if run.status == "completed":
        raise UsageError(f"run {run.id} already completed", "launch a new run instead.")
    plan = Plan.model_validate(run.plan)
    check_features(backend, ResourceRequest.of(plan.resources).needs())
    plan = check_same_dataset(run.id, plan, backend)
    ledger.add_event(run.id, "resume", f"resumed after status {run.status}")
    ledger.update(run.id, status="submitted", exit_reason=None, ended_at=None)
    return submit(plan, backend, ledger, ledger.get(run.id)), backend


def check_same_dataset(run_id: str, plan, backend: Backend):
    """A resume trains on from checkpoints of the data the run started with: refuse when the
    dataset's manifest is no longer the recorded one (`prepare --overwrite` with another seed
    keeps the counts and changes the split) unless the records are byte for byte the same
    (a prepare run again with the same options rewrites only the manifest's date). Returns
    the plan to resume with: the same, or carrying the new manifest's sha256 (the trainer
    checks the channel's manifest against it) when only the manifest changed."""
    was = plan.dataset
    try:
        if was.path.startswith(REMOTE_SCHEMES):
            now = backend.dataset_summary(was.path)
        else:
            now = summarize_dataset(Path(was.path), verify_checksums=False)
    except DataError as exc:
        raise DataError(f"run {run_id} cannot resume on its dataset: {exc.what}", exc.fix) from None
    if now.manifest_sha256 == was.manifest_sha256:
        return plan
    if _same_records(was, now):  # the records were checked equal here, at the launch
        hp = plan.hyperparameters.model_copy(
            update={"dataset_manifest_sha256": now.manifest_sha256 or ""}
        )
        dataset = was.model_copy(update={"manifest_sha256": now.manifest_sha256})
        return plan.model_copy(update={"hyperparameters": hp, "dataset": dataset})
    changed = sorted(set(was.rec_sha256) ^ set(now.rec_sha256)) or [
        name for name, sha in sorted(was.rec_sha256.items()) if now.rec_sha256[name] != sha
    ]
    raise DataError(
        f"run {run_id} trained on dataset {was.name!r} at {was.path} with manifest sha256 "
        f"{was.manifest_sha256}; that folder now holds manifest sha256 {now.manifest_sha256} "
        f"({', '.join(changed) or 'other counts or classes'} changed): resuming would train "
        "on other data",
        "launch a new run on the dataset as it is now, or prepare the dataset again exactly "
        "as before (same images, options and --seed) to resume this run.",
    )


def _same_records(was, now) -> bool:
    keys = ("name", "num_classes", "train_count", "val_count", "test_count", "rec_sha256")
    return all(getattr(was, k) == getattr(now, k) for k in keys)


def submit(plan, backend: Backend, ledger: Ledger, run: Run) -> Run:
    """Submit a run already in the ledger (a resume); a refused submit is recorded as failed."""
    try:
        ref = backend.submit(plan, run, journal(ledger, run.id))
    except BusyError:  # another resume of the run won: its process and record stand
        raise
    except FinetuneError as exc:
        ledger.update(run.id, status="failed", exit_reason=str(exc), ended_at=time.time())
        raise
    started = run.started_at or time.time()
    return ledger.update(run.id, backend_ref=ref, started_at=started)
