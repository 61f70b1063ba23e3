"""The EC2 backend: self-terminating GPU instances (one per host) per attempt, spot-resilient.

launch   options model, resources and the dry run's pre-flight (region, price, runtime and
         euro caps, vCPU quota): ec2_plan.
submit   preflight, dataset + plan to S3, a per-run instance profile, the intent noted
         (ec2_intent), RunInstances with capacity fallback (ec2_launch); idempotent: a live
         attempt (or one a killed launch made, found by its tags) is adopted, not doubled.
status   the agent's status.json in S3 + DescribeInstances. An ended attempt is closed
         (instance terminated if still up, cost into the ledger); an interrupted one is
         relaunched within --max-restarts (ec2_relaunch) and resumes from its S3 checkpoints.
metrics  metrics.jsonl in S3; logs: train.log in S3 (byte ranges); stop: terminate.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from finetune.aws.datasetscope import read_prefixes
from finetune.aws.infra import boundary_arn
from finetune.backends import base, modelfiles
from finetune.backends.base import Capabilities, Hooks, Status
from finetune.backends.ec2 import ami as ec2_ami
from finetune.backends.ec2 import cost as ec2_cost
from finetune.backends.ec2 import hosts as ec2_hosts
from finetune.backends.ec2 import infra as ec2_infra
from finetune.backends.ec2 import intent as ec2_intent
from finetune.backends.ec2 import launch as ec2_launch
from finetune.backends.ec2 import observe as ec2_observe
from finetune.backends.ec2 import plan as ec2_plan
from finetune.backends.ec2 import prepare as ec2_prepare
from finetune.backends.ec2 import relaunch as ec2_relaunch
from finetune.backends.ec2.request import instance_policy
from finetune.backends.ec2.state import AttemptRecord, Ec2Options, Ec2State
from finetune.errors import FinetuneError, UsageError
from finetune.metrics import EpochMetrics


class Ec2Backend:
    name = "ec2"
    capabilities = Capabilities()  # spot (with relaunch), several hosts, GPUs, terminate
    Options = ec2_plan.Ec2LaunchOptions
    price_book = "ec2"  # the catalog prices it bills by (catalog.prices, report.money rule)
    poll_seconds = 1.0
    stream_logs = False  # the agent's status detail (img/s, relaunches) is shown instead

    def __init__(self, options=None, hooks: Hooks | None = None, ledger=None) -> None:
        if isinstance(options, ec2_plan.Ec2LaunchOptions):
            options = options.state_options()
        self.options: Ec2Options | None = options  # None: the options stored with the run
        self._ledger = ledger
        self._clients = ec2_infra.Clients()

    def current_spot_prices(self, instance_types: list[str], region: str) -> dict:
        """EC2's current spot price of each type in ``region`` (its lowest zone, named in the
        source), as launch records them: DescribeSpotPriceHistory (`finetune plan --live-spot`)."""
        from finetune.catalog import spot

        return spot.current(instance_types, region, self._clients("ec2", region))

    # -- launch ---------------------------------------------------------------------------
    def resources(self, request: base.ResourceRequest):
        return ec2_plan.resources(request)

    def dataset_summary(self, uri: str):
        return ec2_plan.dataset_summary(uri)

    def preflight(self, plan) -> base.Preflight:
        return ec2_plan.check(plan, self.options or Ec2Options(), self._clients)

    def orphans(self, live_runs: set[str], older_than_s: float) -> list[base.Orphan]:
        from finetune.backends.ec2 import cleanup as ec2_cleanup

        return ec2_cleanup.find_orphans(self._clients, live_runs, older_than_s)

    def remove(self, orphans: list[base.Orphan]) -> list[str]:
        from finetune.backends.ec2 import cleanup as ec2_cleanup

        return ec2_cleanup.remove(self._clients, orphans)

    # -- submit ---------------------------------------------------------------------------
    def submit(self, plan, run) -> str:
        """Start (or resume) the run on a new instance; returns its instance id."""
        with _locked(run):
            return self._submit(plan, run)

    def _submit(self, plan, run) -> str:
        state = ec2_prepare.state_for(plan, run, self.options, self._clients)
        if state.intent:  # an earlier launch of this run may have started instances
            self._adopt(run, state)
        cur = state.current
        if cur and cur.open:
            self._settle(run, state)  # an attempt that ended unseen is closed first
            if cur.open:
                return cur.instance_id  # still alive: a retried launch adopts it
        state.stop_requested, state.done, state.restarts = False, False, 0
        res = plan.resources
        choice = [ec2_relaunch.Candidate(res.instance_type, res.spot)]
        self._launch(run, state, choice, prefer_subnet=None)
        self._record(run, region=state.region)
        return state.current.instance_id

    def _launch(self, run, state: Ec2State, choices, prefer_subnet: str | None) -> AttemptRecord:
        """One new attempt: AMI, subnets and groups, the run's role, then RunInstances."""
        opts, region = state.options, state.region
        ec2 = self._clients("ec2", region)
        plan = _plan(run)
        arch = ec2_prepare.preflight(plan, opts)
        engine = plan.hyperparameters.engine
        image = ec2_ami.resolve(self._clients("ssm", region), ec2, arch, engine, opts.ami)
        ami, root = image.ami_id, image.root_device
        subnets = ec2_relaunch.subnet_order(
            ec2_infra.subnets(ec2, opts.subnets, opts.azs), prefer_subnet
        )
        count = _plan(run).resources.hosts
        group = ec2_hosts.cluster_group if count > 1 else ec2_infra.security_group
        groups = {s["VpcId"]: group(ec2, s["VpcId"]) for s in subnets}
        reads = read_prefixes(state.dataset_uri, state.bucket, opts.read_prefixes)
        policy = instance_policy(state.bucket, state.prefix, reads, state.image)
        boundary = boundary_arn(ec2_infra.account(self._clients("sts", region)), region)
        state.instance_profile = ec2_infra.ensure_instance_profile(
            self._clients("iam", region), run.id, policy, boundary
        )
        quotes = {c: ec2_cost.hourly_price(c.instance_type, region, c.spot, ec2) for c in choices}
        cap = ec2_cost.runtime_cap(state, ec2_cost.dearest(quotes, count))
        first = ec2_launch.base_spec(run.id, state, choices[0], ami, root, cap, count)
        if engine == "torch":  # the wheel goes to the run's prefix; the AMI's python installs it
            wheel = ec2_ami.upload_wheel(self._clients("s3", region), state.bucket, state.prefix)
            first = replace(first, engine=engine, wheel_uri=wheel, python=image.python)
        note = ec2_intent.record(state, run.id, first.attempt, f"{run.id}-a{first.attempt}")
        state.save(run.run_dir)  # before RunInstances: a killed launch is found by its tags
        self._event(run, "intent", note)
        launched = ec2_launch.launch(ec2, first, choices, subnets, groups)
        spec, inst = launched.spec, launched.instance
        ids = [i["InstanceId"] for i in launched.instances]
        if count > 1:
            try:
                s3 = self._clients("s3", region)
                ec2_hosts.publish(
                    ec2, s3, state.bucket, state.prefix, spec.attempt, launched.instances
                )
            except FinetuneError:
                ec2_infra.terminate(ec2, ids)  # hosts that can never find each other
                raise
        az = inst.get("Placement", {}).get("AvailabilityZone", "")
        quote = quotes[ec2_relaunch.Candidate(spec.instance_type, spec.spot)]
        if spec.spot and az:  # the price in the zone it landed in is the one paid
            zoned = ec2_cost.hourly_price(spec.instance_type, region, True, ec2, zone=az)
            quote = zoned if zoned.usd_per_hour is not None else quote
        record = AttemptRecord(
            n=spec.attempt,
            instance_id=inst["InstanceId"],
            instance_type=spec.instance_type,
            spot=spec.spot,
            subnet_id=spec.subnet_id,
            az=az,
            launched_at=_timestamp(inst.get("LaunchTime")),
            usd_per_hour=quote.usd_per_hour,
            price_source=quote.source,
            price_as_of=quote.as_of,
            instance_ids=ids if count > 1 else [],
        )
        state.attempts.append(record)
        state.intent = None
        state.tried = launched.tried
        state.save(run.run_dir)
        self._event(
            run,
            "image",
            f"attempt {spec.attempt}: {engine} on {ami} "
            f"({image.name or 'name unknown'}; from {image.source})",
        )
        recorded = plan.with_runtime({**ec2_ami.runtime(engine, arch), **image.record()})
        self._record(run, plan=recorded.model_dump(mode="json"))
        return record

    # -- status ---------------------------------------------------------------------------
    def status(self, run) -> Status:
        """Where the run is; closes ended attempts and relaunches after spot interruptions.
        One process at a time per run (`launch` following while `runs show` looks)."""
        if not run.run_dir:
            return Status("submitted", detail="no instance launched yet")
        with _locked(run):
            return self._status(run)

    def _status(self, run) -> Status:
        state = Ec2State.load(run.run_dir)
        if state is None:
            return Status("submitted", detail="no instance launched yet")
        if state.done:
            return _with_facts(self._final(state), state)
        if state.intent:
            self._adopt(run, state)
        if state.current is None:
            return Status("submitted", detail="launch recorded; no instance found yet")
        doc = self._settle(run, state)
        if state.done:
            return _with_facts(self._final(state), state)
        if state.current.outcome == "interrupted":  # a spot interruption, not a stop
            return _with_facts(self._relaunch(run, state), state)
        return _with_facts(ec2_observe.active_status(state, doc), state)

    def _settle(self, run, state: Ec2State) -> dict:
        """Close the current attempt if it ended (S3 status or instance state); returns the
        attempt's status.json."""
        cur = state.current
        doc = ec2_observe.status_doc(self._clients, state)
        if doc.get("attempt") != cur.n:
            doc = {}
        if not cur.open:
            return doc
        ec2 = self._clients("ec2", state.region)
        found = ec2_infra.describe(ec2, cur.hosts)
        insts = [found.get(i) for i in cur.hosts]
        outcome, reason, spot = ec2_hosts.observe_all(doc, insts, state.stop_requested)
        if outcome is None:
            return doc
        up = [i["InstanceId"] for i in insts if i and i["State"]["Name"] not in ec2_observe.ENDED]
        live = insts[0] is not None and insts[0]["InstanceId"] in up
        ec2_infra.terminate(ec2, up)  # one host ended: the others cannot go on without it
        cur.outcome, cur.reason = outcome, reason
        cur.interrupted_by_ec2 = outcome == "interrupted" and spot and cur.spot
        cur.ended_at = time.time() if live else (doc.get("ended_at") or time.time())
        state.save(run.run_dir)
        self._record(run, **ec2_cost.ledger_fields(state))
        self._event(run, "attempt", f"attempt {cur.n} on {cur.instance_id}: {outcome}")
        if outcome == "interrupted" and not spot:
            cur.reason = f"{reason}; not a spot interruption (the --max-runtime limit?), so no "
            cur.reason += f"automatic relaunch: `finetune launch --resume {run.id}` continues it"
            self._release(run, state)
        elif outcome != "interrupted" or state.stop_requested:
            self._release(run, state)
        return doc

    def _relaunch(self, run, state: Ec2State) -> Status:
        cur, opts = state.current, state.options
        spent = ec2_cost.eur_spent(state)
        left = None if opts.max_eur is None or spent is None else opts.max_eur - spent
        decision = ec2_relaunch.decide(state.restarts, opts.max_restarts, left)
        if decision.relaunch:
            res = _plan(run).resources
            choices = ec2_relaunch.candidates(
                res.instance_type, res.spot, opts.fallback_instances, opts.allow_on_demand_fallback
            )
            state.restarts += 1
            try:
                new = self._launch(run, state, choices, prefer_subnet=cur.subnet_id)
            except FinetuneError as exc:  # no capacity anywhere, quota, budget too small
                decision = ec2_relaunch.Decision(False, f"relaunch failed: {exc.what}")
            else:
                self._record(run, backend_ref=new.instance_id)
                self._event(run, "relaunch", f"{decision.reason}: {new.instance_id}")
                return Status("submitted", detail=f"interrupted; {decision.reason}")
        cur.reason = f"{cur.reason}; {decision.reason}"
        self._release(run, state)
        return self._final(state)

    def _adopt(self, run, state: Ec2State) -> None:
        """Record the instances a launch made but never noted (found by their tags)."""
        ec2 = self._clients("ec2", state.region)

        def price(instance_type: str, spot: bool):
            return ec2_cost.hourly_price(instance_type, state.region, spot, ec2)

        found = ec2_intent.adopt(ec2, run.id, state, price)
        if found is None:
            return
        state.save(run.run_dir)
        self._record(run, backend_ref=found.instance_id)
        self._event(run, "adopted", f"attempt {found.n}: {found.instance_id}, found by its tags")

    def _final(self, state: Ec2State) -> Status:
        cur = state.current
        if cur is None:
            return Status("stopped", reason="stopped before any instance was launched")
        return Status(
            cur.outcome,
            reason=cur.reason,
            started_at=state.attempts[0].launched_at,
            ended_at=cur.ended_at,
        )

    def _release(self, run, state: Ec2State) -> None:
        """The run is over: its instance profile goes (instances are already terminating)."""
        state.done = True
        state.save(run.run_dir)
        if state.instance_profile:
            iam = self._clients("iam", state.region)
            ec2_infra.delete_instance_profile(iam, state.instance_profile)

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
            self._release(run, state)

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

    # -- helpers --------------------------------------------------------------------------
    def _record(self, run, **fields) -> None:
        self._with_ledger(lambda ledger: ledger.update(run.id, **fields))

    def _event(self, run, kind: str, message: str) -> None:
        self._with_ledger(lambda ledger: ledger.add_event(run.id, kind, message))

    def _with_ledger(self, action) -> None:
        if self._ledger is not None:
            action(self._ledger)
            return
        from finetune.runs.ledger import open_default

        with open_default() as ledger:
            action(ledger)


def _with_facts(status: Status, state: Ec2State) -> Status:
    """The ledger's money columns travel with the status (Status.facts)."""
    return replace(status, facts={**ec2_cost.ledger_fields(state), "region": state.region})


def _locked(run):
    from filelock import FileLock

    return FileLock(str(Path(run.run_dir) / "ec2.lock"), timeout=300)


def _plan(run):
    from finetune.plan import Plan

    return Plan.model_validate(run.plan)


def _timestamp(value) -> float:
    return value.timestamp() if hasattr(value, "timestamp") else time.time()
