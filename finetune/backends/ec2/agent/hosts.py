"""Multi-host attempts: wait for the control side's hosts.json, then name this host.

The control side writes hosts.json once every instance of the attempt has a private IP. The
agent waits for the document of its own attempt (bounded: a run whose launch broke half-way
must fail, not hang), finds itself by instance id, rewrites resourceconfig.json with every
host, and gives the trainer the addresses in FINETUNE_HOST_ADDRESSES (no DNS needed).
"""

from __future__ import annotations

import ipaddress
import json
import time

from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.agent.imds import ImdsUnavailable
from finetune.backends.ec2.agent.supervisor import AgentError, Attempt
from finetune.contracts.container import ADDRESSES_ENV
from finetune.files import write_atomic

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
    check_addresses(doc["hosts"], vpc_cidrs(run.imds))
    config = run.cfg.ml_root / "input" / "config" / "resourceconfig.json"
    # no network_interface_name: ps-lite picks the interface that reaches the other hosts
    write_atomic(config, json.dumps({"current_host": name, "hosts": hosts}, indent=2))
    run.host = name
    run.env[ADDRESSES_ENV] = json.dumps(doc["hosts"])
    where = ", ".join(f"{h}={doc['hosts'][h]}" for h in hosts)
    run.say(f"host {name} of {len(hosts)}: {where}")


def vpc_cidrs(imds) -> list | None:
    """This instance's VPC IPv4 CIDR blocks (IMDS network/interfaces/macs/MAC/
    vpc-ipv4-cidr-blocks), or None where IMDS cannot say."""
    if imds is None:
        return None
    try:
        mac = (imds.get("meta-data/mac") or "").strip()
        text = mac and imds.get(f"meta-data/network/interfaces/macs/{mac}/vpc-ipv4-cidr-blocks")
    except (ImdsUnavailable, OSError):
        return None
    try:
        return [ipaddress.IPv4Network(c.strip()) for c in (text or "").split() if c.strip()] or None
    except ValueError:
        return None


_PRIVATE = [ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]


def check_addresses(addresses: dict, cidrs: list | None) -> None:
    """Every host's address is an IPv4 address inside this instance's VPC (or, where IMDS
    cannot say which, a private one): whoever can write hosts.json must not be able to send
    every host's gradients and parameters to an address of their choosing."""
    allowed = cidrs or _PRIVATE
    for host, address in addresses.items():
        try:
            ip = ipaddress.IPv4Address(str(address))
        except ValueError:
            ip = None
        if ip is None or not any(ip in net for net in allowed):
            within = ", ".join(str(n) for n in allowed)
            raise AgentError(
                f"{p.HOSTS} gives {host} the address {str(address)[:60]!r}, not an IPv4 "
                f"address inside this VPC ({within}): refused, nothing was started"
            )


def _parse(text: str | None) -> dict:
    try:
        doc = json.loads(text) if text else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
