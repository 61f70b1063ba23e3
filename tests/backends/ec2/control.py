"""Helpers of the control-side tests: launch through the library, play the agent's part."""

from __future__ import annotations

import json
import time

import boto3

from finetune import service
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.backend import Ec2Backend
from finetune.backends.ec2.options import Ec2Options
from finetune.runs.ledger import Ledger

from .conftest import BUCKET, REGION

OPEN_LEDGERS: list[Ledger] = []  # closed after each test (tests/backends/ec2/conftest.py)


def launch(
    tmp_path, dataset, options: Ec2Options | None = None, spot: bool = True, device="gpu", **kw
):
    """service.launch of a smoke recipe on g5.xlarge; returns (run, backend, ledger)."""
    from finetune.plan import Resources, build_plan

    resources = Resources(backend="ec2", instance_type="g5.xlarge", device=device, spot=spot)
    plan = build_plan("smoke-resnet18", dataset, resources, kw.pop("overrides", ()))
    ledger = Ledger(tmp_path / "ledger.sqlite")
    OPEN_LEDGERS.append(ledger)
    backend = Ec2Backend(options or Ec2Options())
    run = service.launch(plan, backend, ledger)
    return run, backend, ledger


def agent_says(run_id: str, state: str, attempt: int, **fields) -> None:
    """Write status.json as the on-instance agent would."""
    doc = {"state": state, "attempt": attempt, "updated_at": time.time(), **fields}
    s3 = boto3.client("s3", region_name=REGION)
    s3.put_object(Bucket=BUCKET, Key=p.run_prefix(run_id) + p.STATUS, Body=json.dumps(doc))


def instances_of(run_id: str, states=None) -> list[dict]:
    ec2 = boto3.client("ec2", region_name=REGION)
    filters = [{"Name": "tag:finetune:run-id", "Values": [run_id]}]
    if states:
        filters.append({"Name": "instance-state-name", "Values": states})
    pages = ec2.get_paginator("describe_instances").paginate(Filters=filters)
    return [i for pg in pages for r in pg["Reservations"] for i in r["Instances"]]


def terminate(instance_id: str) -> None:
    boto3.client("ec2", region_name=REGION).terminate_instances(InstanceIds=[instance_id])


def sync(run, backend, ledger):
    return service.sync(ledger.get(run.id), backend, ledger)


def sent_run_instances(layer) -> list[dict]:
    return layer.sent("RunInstances")
