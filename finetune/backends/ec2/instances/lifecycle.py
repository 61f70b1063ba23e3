"""An EC2 run after its launch: where it is (observe), closing an attempt that ended (settle),
a new attempt after a spot interruption (relaunch), instances a killed launch made (adopt),
and the end of the run (release).

What the ledger should keep (attempts ended, relaunches, adoptions, the charges, a new
backend reference) goes into the journal; service/ writes it, never this module.
"""

from __future__ import annotations

import time
from dataclasses import replace

from finetune.backends.base import Journal, Status
from finetune.backends.ec2 import cost as ec2_cost
from finetune.backends.ec2.instances import hosts as ec2_hosts
from finetune.backends.ec2.instances import intent as ec2_intent
from finetune.backends.ec2.instances import relaunch as ec2_relaunch
from finetune.backends.ec2.instances import status as ec2_observe
from finetune.backends.ec2.instances import submit as ec2_attempt
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.setup import profile as ec2_profile
from finetune.backends.ec2.state import Ec2State
from finetune.errors import FinetuneError
from finetune.plan import Plan


def status(clients, run, journal: Journal) -> Status:
    """Where the run is: ended attempts closed, interrupted ones relaunched; the ledger's
    money columns travel with it (Status.facts)."""
    state = Ec2State.load(run.run_dir)
    if state is None:
        return Status("submitted", detail="no instance launched yet")
    if state.done:
        return _with_facts(final(state), state)
    if state.intent:
        adopt(clients, run, state, journal)
    if state.current is None:
        return Status("submitted", detail="launch recorded; no instance found yet")
    doc = settle(clients, run, state, journal)
    if state.done:
        return _with_facts(final(state), state)
    if state.current.outcome == "interrupted":  # a spot interruption, not a stop
        return _with_facts(relaunch(clients, run, state, journal), state)
    return _with_facts(ec2_observe.active_status(state, doc), state)


def _with_facts(status: Status, state: Ec2State) -> Status:
    """The charges, interrupted seconds and region, for the ledger's columns."""
    return replace(status, facts={**ec2_cost.ledger_fields(state), "region": state.region})


def settle(clients, run, state: Ec2State, journal: Journal) -> dict:
    """Close the current attempt if it ended (S3 status or instance state); returns the
    attempt's status.json."""
    cur = state.launched()
    doc = ec2_observe.status_doc(clients, state)
    if doc.get("attempt") != cur.n:
        doc = {}
    if not cur.open:
        return doc
    ec2 = clients("ec2", state.region)
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
    journal.update(**ec2_cost.ledger_fields(state))
    journal.event("attempt", f"attempt {cur.n} on {cur.instance_id}: {outcome}")
    if outcome == "interrupted" and not spot:
        hint = "" if ec2_observe.EC2_ENDED_IT in (reason or "") else " (the --max-runtime limit?)"
        cur.reason = f"{reason}; not a spot interruption{hint}, so no automatic relaunch: "
        cur.reason += f"`finetune launch --resume {run.id}` continues it"
        release(clients, run, state)
    elif outcome != "interrupted" or state.stop_requested:
        release(clients, run, state)
    return doc


def relaunch(clients, run, state: Ec2State, journal: Journal) -> Status:
    """After a spot interruption: a new attempt within --max-restarts and --max-eur, on the
    best choice with capacity; else the run ends, saying why."""
    cur, opts = state.launched(), state.options
    spent = ec2_cost.eur_spent(state)
    left = None if opts.max_eur is None or spent is None else opts.max_eur - spent
    decision = ec2_relaunch.decide(state.restarts, opts.max_restarts, left)
    if decision.relaunch:
        res = Plan.model_validate(run.plan).resources
        choices = ec2_relaunch.candidates(
            res.instance_type or cur.instance_type,  # an EC2 plan names one; else as launched
            res.spot,
            opts.fallback_instance,
            opts.allow_on_demand_fallback,
        )
        state.restarts += 1
        try:
            new = ec2_attempt.launch(clients, run, state, choices, cur.subnet_id, journal)
        except FinetuneError as exc:  # no capacity anywhere, quota, budget too small
            why = f"relaunch failed: {exc.what.rstrip('.')}; once that is solved, "
            why += f"`finetune launch --resume {run.id}` continues it"
            decision = ec2_relaunch.Decision(False, why)
        else:
            journal.update(backend_ref=new.instance_id)
            journal.event("relaunch", f"{decision.reason}: {new.instance_id}")
            return Status("submitted", detail=f"interrupted; {decision.reason}")
    cur.reason = f"{cur.reason}; {decision.reason}"
    release(clients, run, state)
    return final(state)


def adopt(clients, run, state: Ec2State, journal: Journal) -> None:
    """Record the instances a launch made but never noted (found by their tags)."""
    ec2 = clients("ec2", state.region)

    def price(instance_type: str, spot: bool):
        return ec2_cost.hourly_price(instance_type, state.region, spot, ec2)

    found = ec2_intent.adopt(ec2, run.id, state, price)
    if found is None:
        return
    state.save(run.run_dir)
    journal.update(backend_ref=found.instance_id)
    journal.event("adopted", f"attempt {found.n}: {found.instance_id}, found by its tags")


def final(state: Ec2State) -> Status:
    """How the run ended, from its last attempt."""
    cur = state.current
    if cur is None:
        return Status("stopped", reason="stopped before any instance was launched")
    if cur.outcome is None:  # never closed: its launch failed and was undone (undo_launch)
        return Status("failed", reason=cur.reason or "the attempt's launch was undone",
                      started_at=state.attempts[0].launched_at)  # fmt: skip
    return Status(
        cur.outcome,
        reason=cur.reason,
        started_at=state.attempts[0].launched_at,
        ended_at=cur.ended_at,
    )


def release(clients, run, state: Ec2State) -> None:
    """The run is over: its instance profile goes (instances are already terminating)."""
    state.done = True
    state.save(run.run_dir)
    if state.instance_profile:
        iam = clients("iam", state.region)
        ec2_profile.delete_instance_profile(iam, state.instance_profile)
    if any(a.instance_ids for a in state.attempts):  # a multi-host run: its own group goes
        ec2_hosts.delete_cluster_groups(clients("ec2", state.region), run.id)


def undo_launch(clients, run, state: Ec2State, error: FinetuneError) -> None:
    """A launch that failed (no capacity, a quota, AWS throttling to the end): nothing of it
    may outlive the error. What it made goes now, each step on its own so one failure skips
    none of the others: any instance found by the run's tags (a reply lost on the last try),
    the run's role and instance profile, its cluster groups. What may be left is named in
    ``error.left`` and its fix: the ledger then keeps the run (failed), so `finetune
    cleanup` knows them as this machine's and removes them at any age."""
    name = ec2_profile.profile_name(run.id)
    ec2, sent = clients("ec2", state.region), state.intent  # intent: RunInstances was sent
    left, why = [], []

    def step(undo, what: str | None):
        try:
            return undo()
        except FinetuneError as failed:
            if what:  # None: nothing of it can exist (RunInstances was never sent)
                left.append(what)
                why.append(failed.what)
            return None

    ended = step(lambda: _end_instances(ec2, run.id), _instances_left(run.id, sent))
    if ended:
        error.what += f" (the instance it started all the same, {', '.join(ended)}, is ended)"
    iam = clients("iam", state.region)
    step(lambda: ec2_profile.delete_instance_profile(iam, name),
         f"the IAM role and instance profile {name}")  # fmt: skip
    step(lambda: ec2_hosts.delete_cluster_groups(ec2, run.id),
         f"any security group tagged finetune:run-id={run.id}")  # fmt: skip
    state.intent = None
    state.done = True
    state.save(run.run_dir)
    if left:
        error.left = tuple(left)
        error.fix = (
            f"{error.fix} Undoing the launch failed too ({'; '.join(why)}), so AWS may still "
            f"hold {'; '.join(left)}. The run stays in the ledger as failed (`finetune runs "
            f"show {run.id}`): `finetune cleanup` removes what is left once AWS answers again."
        )


def _end_instances(ec2, run_id: str) -> list[str]:
    """Terminate the run's live instances (found by its tags); returns their ids."""
    ids = [i["InstanceId"] for i in ec2_infra.find_instances(ec2, run_id)]
    ec2_infra.terminate(ec2, ids)
    return ids


def _instances_left(run_id: str, intent: dict | None) -> str | None:
    """What may be left when the run's instances could not be ended (None: nothing can be,
    as RunInstances was never sent)."""
    if intent is None:
        return None
    attempt = intent.get("attempt", "?")
    return (
        f"an instance RunInstances may have started (tags finetune:run-id={run_id}, "
        f"finetune:attempt={attempt})"
    )
