"""Multi-host attempts: wait for the control side's hosts.json, then name this host.

The control side writes hosts.json once every instance of the attempt has a private IP. The
agent waits for the document of its own attempt (bounded: a run whose launch broke half-way
must fail, not hang), finds itself by instance id, rewrites resourceconfig.json with every
host, and gives the trainer the addresses in FINETUNE_HOST_ADDRESSES (no DNS needed).
"""

from __future__ import annotations

import json
import time

from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.agent.supervisor import AgentError, Attempt
from finetune.files import write_atomic
from finetune.train.hosts import ADDRESSES_ENV

POLL_S = 2.0


def wait_for_hosts(run: Attempt, sleep=time.sleep) -> dict:
    """This attempt's hosts.json; AgentError when it does not come within hosts_wait."""
    cfg = run.cfg
    deadline = time.monotonic() + cfg.hosts_wait
    while True:
        text = run.store.read_text(p.HOSTS)
        doc = _parse(text)
        if doc.get("attempt") == cfg.attempt:
            return doc
        if time.monotonic() >= deadline:
            raise AgentError(
                f"no {p.HOSTS} for attempt {cfg.attempt} under s3://{cfg.bucket}/{cfg.prefix} "
                f"after {cfg.hosts_wait:g} s: the launch did not finish publishing the hosts"
            )
        sleep(POLL_S)


def join(run: Attempt, doc: dict) -> None:
    """Become this instance's host: resourceconfig.json and the trainer's address map."""
    name = doc.get("instances", {}).get(run.instance_id or "")
    hosts = sorted(doc.get("hosts", {}), key=lambda h: int(h.rsplit("-", 1)[-1]))
    if not name or len(hosts) != run.cfg.hosts:
        raise AgentError(
            f"{p.HOSTS} does not list this instance ({run.instance_id}) among "
            f"{run.cfg.hosts} hosts: {json.dumps(doc)[:300]}"
        )
    config = run.cfg.ml_root / "input" / "config" / "resourceconfig.json"
    # no network_interface_name: ps-lite picks the interface that reaches the other hosts
    write_atomic(config, json.dumps({"current_host": name, "hosts": hosts}, indent=2))
    run.host = name
    run.env[ADDRESSES_ENV] = json.dumps(doc["hosts"])
    where = ", ".join(f"{h}={doc['hosts'][h]}" for h in hosts)
    run.say(f"host {name} of {len(hosts)}: {where}")


def _parse(text: str | None) -> dict:
    try:
        doc = json.loads(text) if text else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
