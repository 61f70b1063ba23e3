"""Multi-host EC2 attempts, agent side: wait for hosts.json in S3, name this host, hand the
trainer its peers (real S3 = moto server; the IMDS is not needed for this step)."""

from __future__ import annotations

import json

import boto3
import pytest

from finetune.backends.ec2.agent import hosts
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.agent.environment import AgentConfig
from finetune.backends.ec2.agent.s3sync import RunStore
from finetune.backends.ec2.agent.supervisor import AgentError, Attempt
from finetune.contracts.container import ADDRESSES_ENV

BUCKET, PREFIX = "finetune-hosts-test", "finetune/runs/ft-x/"
DOC = {
    "attempt": 2,
    "hosts": {"algo-1": "10.0.0.5", "algo-2": "10.0.0.9"},
    "instances": {"i-aaa": "algo-1", "i-bbb": "algo-2"},
}


@pytest.fixture
def store(aws):
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    return RunStore(s3, BUCKET, PREFIX)


def _attempt(store, tmp_path, instance: str, wait: float = 5.0) -> Attempt:
    cfg = AgentConfig(
        bucket=BUCKET,
        prefix=PREFIX,
        dataset_uri=f"s3://{BUCKET}/d/",
        attempt=2,
        ml_root=tmp_path / "ml",
        hosts=2,
        hosts_wait=wait,
    )
    (cfg.ml_root / "input" / "config").mkdir(parents=True)
    return Attempt(cfg, store, imds=None, instance_id=instance, host="pending")


def test_waits_for_its_attempt_then_joins(store, tmp_path):
    run = _attempt(store, tmp_path, "i-bbb")
    store.write_text(p.HOSTS, json.dumps({**DOC, "attempt": 1}))  # an older attempt's map
    naps = []

    def publish_during_the_wait(seconds):
        naps.append(seconds)
        store.write_text(p.HOSTS, json.dumps(DOC))

    doc = hosts.wait_for_hosts(run, sleep=publish_during_the_wait)
    assert naps == [hosts.POLL_S] and doc["attempt"] == 2
    hosts.join(run, doc)
    config = json.loads((run.cfg.ml_root / "input/config/resourceconfig.json").read_text())
    assert config == {"current_host": "algo-2", "hosts": ["algo-1", "algo-2"]}
    assert run.host == "algo-2" and not run.primary
    assert json.loads(run.env[ADDRESSES_ENV]) == DOC["hosts"]
    assert run._key(p.STATUS) == f"hosts/algo-2/{p.STATUS}"  # only algo-1 writes the run's own


def test_no_hosts_map_is_a_bounded_failure(store, tmp_path):
    run = _attempt(store, tmp_path, "i-aaa", wait=0.0)
    with pytest.raises(AgentError, match=r"no hosts\.json for attempt 2"):
        hosts.wait_for_hosts(run, sleep=lambda s: None)


def test_a_map_without_this_instance_is_refused(store, tmp_path):
    run = _attempt(store, tmp_path, "i-zzz")
    with pytest.raises(AgentError, match="does not list this instance"):
        hosts.join(run, DOC)


@pytest.mark.parametrize(
    "address",
    ["203.0.113.7", "8.8.8.8", "10.0.0.5; rm -rf /", "attacker.example", "fe80::1", "127.0.0.1"],
)
def test_a_map_with_an_address_outside_the_private_ranges_is_refused(store, tmp_path, address):
    """Issue 34, N8: whoever writes hosts.json must not pick every host's rendezvous address
    (no IMDS here: the private IPv4 ranges stand in for the VPC's CIDR)."""
    run = _attempt(store, tmp_path, "i-bbb")
    doc = {**DOC, "hosts": {"algo-1": address, "algo-2": "10.0.0.9"}}
    with pytest.raises(AgentError, match="not an IPv4 address inside this VPC"):
        hosts.join(run, doc)
    assert not (run.cfg.ml_root / "input/config/resourceconfig.json").exists()
    assert ADDRESSES_ENV not in run.env


def test_addresses_must_lie_in_the_instances_vpc_cidr(store, tmp_path):
    from finetune.backends.ec2.agent.imds import Imds

    from ..fake_imds import FakeImds

    imds = FakeImds(vpc_cidrs="10.0.0.0/24\n10.1.0.0/16").start()
    try:
        run = _attempt(store, tmp_path, "i-bbb")
        run.imds = Imds(imds.url)
        elsewhere = {**DOC, "hosts": {"algo-1": "10.0.1.5", "algo-2": "10.0.0.9"}}
        with pytest.raises(AgentError, match=r"10\.0\.0\.0/24, 10\.1\.0\.0/16"):
            hosts.join(run, elsewhere)  # private, but another VPC's range
        hosts.join(run, {**DOC, "hosts": {"algo-1": "10.1.7.5", "algo-2": "10.0.0.9"}})
        assert run.host == "algo-2"
    finally:
        imds.stop()
