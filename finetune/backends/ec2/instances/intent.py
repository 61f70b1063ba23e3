"""An EC2 launch's intent, written down before RunInstances, and adopting what it made.

A command killed right after RunInstances returned never learns the instance ids: the
instances run, tagged with the run id and attempt, while the run's record shows none. So the
intent (attempt, client token, tags, region) goes into RUN_DIR/ec2.json and the ledger
first; whoever reconciles the run later (`runs show`, `runs stop`, a retried launch) finds
the instances by those tags and records them as the attempt they are.
"""

from __future__ import annotations

import json
import time

from finetune.backends.ec2.request import ATTEMPT_TAG, PROJECT_TAG, RUN_TAG
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.state import AttemptRecord, Ec2State

ANY_STATE = ("pending", "running", "shutting-down", "terminated", "stopping", "stopped")


def record(state: Ec2State, run_id: str, attempt: int, token: str, owner_id: str = "") -> str:
    """Note the coming attempt in ``state`` (the caller saves it); returns the ledger event.
    ``owner_id``: the launching session's aws:userid, the instances' finetune:owner-id."""
    state.intent = {"attempt": attempt, "client_token": token, "at": time.time()}
    if owner_id:
        state.intent["owner_id"] = owner_id
    tags = {PROJECT_TAG[0]: PROJECT_TAG[1], RUN_TAG: run_id, ATTEMPT_TAG: str(attempt)}
    return json.dumps({**state.intent, "region": state.region, "tags": tags}, sort_keys=True)


def adopt(ec2, run_id: str, state: Ec2State, price) -> AttemptRecord | None:
    """The intended attempt's instances, found by tag, recorded as that attempt (None while
    there are none). ``price(instance_type, spot)`` -> ec2.cost.Quote (price and source)."""
    if state.intent is None:  # no attempt was about to be launched
        return None
    attempt = int(state.intent["attempt"])
    # only what the launching session made (an intent of an older finetune has no owner id)
    owner = state.intent.get("owner_id")
    found = ec2_infra.find_instances(ec2, run_id, attempt, states=ANY_STATE, owner_id=owner)
    if not found:
        return None
    hosts = sorted(found, key=lambda i: i.get("AmiLaunchIndex", 0))
    first = hosts[0]
    spot = first.get("InstanceLifecycle") == "spot"
    quote = price(first["InstanceType"], spot)
    launched = first.get("LaunchTime")
    record = AttemptRecord(
        n=attempt,
        instance_id=first["InstanceId"],
        instance_type=first["InstanceType"],
        spot=spot,
        subnet_id=first.get("SubnetId", ""),
        az=first.get("Placement", {}).get("AvailabilityZone", ""),
        launched_at=launched.timestamp() if hasattr(launched, "timestamp") else time.time(),
        usd_per_hour=quote.usd_per_hour,
        price_source=quote.source,
        price_as_of=quote.as_of,
        instance_ids=[i["InstanceId"] for i in hosts] if len(hosts) > 1 else [],
    )
    state.attempts.append(record)
    state.intent = None
    return record
