"""The EC2 backend: self-terminating GPU instances (one per host) per attempt, spot-resilient.

This class is the Protocol surface; the work lives in two groups, as in SkyPilot's
provision/aws (config.py set-up, instance.py lifecycle): setup/ what attempts share (clients,
subnets and groups, roles, AMIs, the vCPU quota, cleanup of what no run owns); instances/ one
launch attempt step by step (RunInstances with capacity fallback), its hosts and intent,
observing it, and the lifecycle (settle, relaunch, adopt, release). options.py holds the launch
flags and resources, preflight.py the checks that cost nothing (the dry run's too) and the
run's S3 prefix, state.py what RUN_DIR/ec2.json keeps, cost.py the prices (asked once per
launch) and charges. The backend never opens the ledger: what it should keep goes into a
Journal (submit) or comes back in the Status (events, facts), and service/ writes it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from finetune.backends import base, modelfiles
from finetune.backends.base import Capabilities, Hooks, Journal, Status
from finetune.backends.ec2 import options as ec2_options
from finetune.backends.ec2 import preflight as ec2_checks
from finetune.backends.ec2 import readiness
from finetune.backends.ec2.agent import protocol
from finetune.backends.ec2.instances import lifecycle
from finetune.backends.ec2.instances import status as ec2_observe
from finetune.backends.ec2.instances import submit as ec2_attempt
from finetune.backends.ec2.options import Ec2Options
from finetune.backends.ec2.setup import cleanup as ec2_cleanup
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.state import Candidate, Ec2State
from finetune.catalog import spot
from finetune.contracts.metrics import EpochMetrics
from finetune.errors import FinetuneError, UsageError


class Ec2Backend:
    name = "ec2"
    capabilities = Capabilities()  # spot (with relaunch), several hosts, GPUs, terminate
    Options = ec2_options.Ec2Options
    price_book = "ec2"  # the catalog prices it bills by (catalog.prices, estimate.money rule)
    POLL_SECONDS = 1.0
    stream_logs = False  # the agent's status detail (img/s, relaunches) is shown instead

    def __init__(self, options=None, hooks: Hooks | None = None, poll_seconds=None) -> None:
        self.options: Ec2Options | None = options  # None: the options stored with the run
        self.poll_seconds = self.POLL_SECONDS if poll_seconds is None else poll_seconds
        self._clients = ec2_infra.Clients(options.region if options is not None else None)
        self._quotes = None  # the pre-flight's prices, which the launch right after uses

    def current_spot_prices(self, instance_types: list[str], region: str) -> dict:
        """EC2's current spot price of each type in ``region`` (its lowest zone, named in the
        source), as launch records them: DescribeSpotPriceHistory (`finetune plan --live-spot`)."""
        return spot.current(instance_types, region, self._clients("ec2", region))

    def readiness(self, aws, instance: str | None = None, spot: bool = False) -> list:
        """`finetune check`'s items of this backend (finetune.aws.readiness.Item)."""
        return readiness.items(aws, instance, spot)

    # -- launch ---------------------------------------------------------------------------
    @property
    def max_eur(self) -> float | None:
        return self.options.max_eur if self.options else None

    def resources(self, request: base.ResourceRequest):
        return ec2_options.resources(request)

    def dataset_summary(self, uri: str):
        return ec2_options.dataset_summary(uri, self.options.region if self.options else None)

    def preflight(self, plan, history=()) -> base.Preflight:
        options = self.options or Ec2Options()
        checked, self._quotes = ec2_checks.dry_run(plan, options, self._clients, history)
        return checked

    def orphans(
        self, live_runs: set[str], older_than_s: float, scope=base.CleanupScope()
    ) -> list[base.Orphan]:
        return ec2_cleanup.find_orphans(self._clients, live_runs, older_than_s, scope)

    def remove(self, orphans: list[base.Orphan]) -> list[str]:
        return ec2_cleanup.remove(self._clients, orphans)

    # -- submit ---------------------------------------------------------------------------
    def submit(self, plan, run, journal: Journal | None = None) -> str:
        """Start (or resume) the run on a new instance; returns its instance id. Idempotent:
        a live attempt (or one a killed launch made, found by its tags) is adopted."""
        journal = journal or Journal()
        with _locked(run):
            state = ec2_checks.state_for(plan, run, self.options, self._clients)
            if state.intent:  # an earlier launch of this run may have started instances
                lifecycle.adopt(self._clients, run, state, journal)
            cur = state.current
            if cur and cur.open:
                lifecycle.settle(self._clients, run, state, journal)  # ended unseen: closed
                if cur.open:
                    return cur.instance_id  # still alive: a retried launch adopts it
            state.stop_requested, state.done, state.restarts = False, False, 0
            res = plan.resources
            choice = [Candidate(res.instance_type, res.spot)]
            quotes, self._quotes = self._quotes, None  # used once: prices move
            try:
                ec2_attempt.launch(self._clients, run, state, choice, None, journal, quotes)
            except FinetuneError as exc:  # nothing of a failed launch stays behind
                lifecycle.undo_launch(self._clients, run, state, exc)
                raise
            journal.update(region=state.region)
            return state.launched().instance_id

    # -- status ---------------------------------------------------------------------------
    def status(self, run) -> Status:
        """Where the run is; closes ended attempts and relaunches after spot interruptions.
        One process at a time per run (`launch` following while `runs show` looks)."""
        if not run.run_dir:
            return Status("submitted", detail="no instance launched yet")
        journal = Journal()
        with _locked(run):
            status = lifecycle.status(self._clients, run, journal)
        facts = {**(status.facts or {}), **journal.columns} or None  # columns it changed, too
        return replace(status, facts=facts, events=tuple(journal.events))

    # -- metrics, logs, stop --------------------------------------------------------------
    def metrics(self, run) -> list[EpochMetrics]:
        state = Ec2State.load(run.run_dir) if run.run_dir else None
        return ec2_observe.metrics(self._clients, state) if state else []

    def logs(self, run, offset: int = 0) -> tuple[str, int]:
        state = Ec2State.load(run.run_dir) if run.run_dir else None
        return ec2_observe.log(self._clients, state, offset) if state else ("", offset)

    def stop(self, run) -> None:
        """Terminate the run's instances (the agent gets SIGTERM, checkpoints, uploads)."""
        state = Ec2State.load(run.run_dir) if run.run_dir else None
        if state is None:
            raise UsageError(f"run {run.id} has no EC2 instance", "nothing to stop.")
        ec2 = self._clients("ec2", state.region)
        live = [i["InstanceId"] for i in ec2_infra.find_instances(ec2, run.id)]
        if not live and (state.current is not None or state.done):
            raise UsageError(f"run {run.id} has no running instance", "nothing to stop.")
        state.stop_requested = True
        state.save(run.run_dir)
        if live:
            ec2_infra.terminate(ec2, live)  # found by tag: also what a killed launch made
        else:  # no instance was ever started: the run ends here
            lifecycle.release(self._clients, run, state)

    def fetch_model(self, run, dest: Path) -> Path:
        """The model/ files the agent uploaded under the run's prefix, into ``dest``."""
        state = Ec2State.load(run.run_dir) if run.run_dir else None
        if state is None or state.current is None or state.current.outcome != "completed":
            raise UsageError(
                f"run {run.id} did not complete on EC2: it has no model",
                f"see `finetune runs show {run.id}`; only a completed run has a model.",
            )
        return modelfiles.into_place(
            dest, lambda tmp: ec2_observe.download_model(self._clients, state, tmp)
        )

    def tensorboard_location(self, run) -> str | None:
        """The agent mirrors /opt/ml/output/tensorboard to the run's prefix (protocol.py)."""
        state = Ec2State.load(run.run_dir) if run.run_dir else None
        if state is None:
            return None
        return f"s3://{state.bucket}/{state.prefix}{protocol.TENSORBOARD}"


def _locked(run):
    from filelock import FileLock

    return FileLock(str(Path(run.run_dir) / "ec2.lock"), timeout=300)
