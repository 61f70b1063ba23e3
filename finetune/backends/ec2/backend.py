"""The EC2 backend: self-terminating GPU instances (one per host) per attempt, spot-resilient.

submit   preflight, dataset + plan to S3, a per-run instance profile, RunInstances with
         capacity fallback (ec2_launch); idempotent: a live attempt is returned, not doubled.
status   the agent's status.json in S3 + DescribeInstances. An ended attempt is closed
         (instance terminated if still up, cost into the ledger); an interrupted one is
         relaunched within --max-restarts (ec2_relaunch) and resumes from its S3 checkpoints.
metrics  metrics.jsonl in S3; logs: train.log in S3 (byte ranges); stop: terminate.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from finetune.aws.datasetscope import read_prefixes
from finetune.aws.infra import boundary_arn
from finetune.backends.base import Capabilities, Status
from finetune.backends.ec2 import cost as ec2_cost
from finetune.backends.ec2 import hosts as ec2_hosts
from finetune.backends.ec2 import infra as ec2_infra
from finetune.backends.ec2 import launch as ec2_launch
from finetune.backends.ec2 import observe as ec2_observe
from finetune.backends.ec2 import prepare as ec2_prepare
from finetune.backends.ec2 import relaunch as ec2_relaunch
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.request import instance_policy
from finetune.backends.ec2.state import AttemptRecord, Ec2Options, Ec2State
from finetune.errors import FinetuneError, UsageError
from finetune.metrics import EpochMetrics


class Ec2Backend:
    name = "ec2"
    capabilities = Capabilities(spot=True, multi_node=True, gpus=True, stop=True)

    def __init__(self, options: Ec2Options | None = None, ledger=None) -> None:
        self.options = options  # None: the options stored with the run (status, stop, resume)
        self._ledger = ledger
        self._clients = ec2_infra.Clients()

    # -- submit ---------------------------------------------------------------------------
    def submit(self, plan, run) -> str:
        """Start (or resume) the run on a new instance; returns its instance id."""
        with _locked(run):
            return self._submit(plan, run)

    def _submit(self, plan, run) -> str:
        state = ec2_prepare.state_for(plan, run, self.options, self._clients)
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
        arch = ec2_prepare.preflight(_plan(run), opts)
        ami, root = ec2_infra.resolve_ami(self._clients("ssm", region), ec2, arch, opts.ami)
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
        prices = {c: ec2_cost.hourly_price(c.instance_type, region, c.spot, ec2) for c in choices}
        dearest = max((usd for usd, _ in prices.values() if usd), default=None)
        # whichever choice launches, --max-eur holds (every host costs the same)
        cap = ec2_cost.runtime_cap(state, dearest * count if dearest else None)
        base = ec2_launch.base_spec(run.id, state, choices[0], ami, root, cap, count)
        launched = ec2_launch.launch(ec2, base, choices, subnets, groups)
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
        usd, source = prices[ec2_relaunch.Candidate(spec.instance_type, spec.spot)]
        record = AttemptRecord(
            n=spec.attempt,
            instance_id=inst["InstanceId"],
            instance_type=spec.instance_type,
            spot=spec.spot,
            subnet_id=spec.subnet_id,
            az=inst.get("Placement", {}).get("AvailabilityZone", ""),
            launched_at=_timestamp(inst.get("LaunchTime")),
            usd_per_hour=usd,
            price_source=source,
            instance_ids=ids if count > 1 else [],
        )
        state.attempts.append(record)
        state.tried = launched.tried
        state.save(run.run_dir)
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
        if state is None or state.current is None:
            return Status("submitted", detail="no instance launched yet")
        if state.done:
            return _with_facts(self._final(state), state)
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
        doc = self._read_status(state)
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

    def _final(self, state: Ec2State) -> Status:
        cur = state.current
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
        text = self._read(state, p.METRICS) if state else None
        events = []
        for line in (text or "").splitlines():
            try:
                events.append(EpochMetrics.model_validate_json(line))
            except ValueError:
                continue
        return events

    def logs(self, run, offset: int = 0) -> tuple[str, int]:
        state = Ec2State.load(run.run_dir) if run.run_dir else None
        if state is None:
            return "", offset
        s3 = self._clients("s3", state.region)
        try:
            obj = ec2_infra.call(
                s3.get_object,
                Bucket=state.bucket,
                Key=state.prefix + p.LOG,
                Range=f"bytes={offset}-",
            )
        except Exception as exc:
            if ec2_infra.error_code(exc) in ("NoSuchKey", "InvalidRange", "404"):
                return "", offset
            raise ec2_infra.cloud_error(exc, "reading the run's log") from None
        data = obj["Body"].read()
        return data.decode("utf-8", "replace"), offset + len(data)

    def stop(self, run) -> None:
        """Terminate the run's instances (the agent gets SIGTERM, checkpoints, uploads)."""
        state = Ec2State.load(run.run_dir) if run.run_dir else None
        if state is None:
            raise UsageError(f"run {run.id} has no EC2 instance", "nothing to stop.")
        ec2 = self._clients("ec2", state.region)
        live = [i["InstanceId"] for i in ec2_infra.find_instances(ec2, run.id)]
        if not live:
            raise UsageError(f"run {run.id} has no running instance", "nothing to stop.")
        state.stop_requested = True
        state.save(run.run_dir)
        ec2_infra.terminate(ec2, live)

    # -- helpers --------------------------------------------------------------------------
    def _read_status(self, state: Ec2State) -> dict:
        text = self._read(state, p.STATUS)
        try:
            return json.loads(text) if text else {}
        except ValueError:
            return {}

    def _read(self, state: Ec2State, name: str) -> str | None:
        s3 = self._clients("s3", state.region)
        try:
            body = ec2_infra.call(s3.get_object, Bucket=state.bucket, Key=state.prefix + name)[
                "Body"
            ]
        except Exception as exc:
            if ec2_infra.error_code(exc) in ("NoSuchKey", "404"):
                return None
            where = f"s3://{state.bucket}/{state.prefix}{name}"
            raise ec2_infra.cloud_error(exc, f"reading {where}") from None
        return body.read().decode("utf-8", "replace")

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
