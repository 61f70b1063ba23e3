"""`finetune launch --backend ec2` under AWS API faults (issue 34's hostile probe): throttling
retried within our budget or ended with a clear message, capacity and quota errors of a
multi-host run, and EC2 taking an instance back while it boots. After a launch fails nothing
of it stays behind (no instance, role, instance profile or cluster group) and the ledger
holds no run; an instance EC2 ends before training is an interruption, never a completion."""

from __future__ import annotations

import re

import boto3
import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.runs.ledger import open_default

from .conftest import ACCOUNT, REGION, live_instances
from .control import agent_says, instances_of
from .faults import Fault

LIVE = ["pending", "running", "stopping", "stopped"]
SPOT_RECLAIM = ("Server.SpotInstanceTermination", "Spot instance termination")


def _launch(dataset, *extra):
    args = ["launch", "smoke-resnet18", "--dataset", str(dataset), "--backend", "ec2"]
    return CliRunner().invoke(app, [*args, "--instance", "g5.xlarge", "--detach", *extra])


def _run_id(output: str) -> str:
    return re.search(r"Run (ft-[\w-]+) started", output)[1]


def _left_behind() -> dict:
    """What finetune made that is still there: live instances, run roles and profiles,
    run cluster groups, runs in the ledger."""
    ec2 = boto3.client("ec2", region_name=REGION)
    iam = boto3.client("iam", region_name=REGION)
    groups = ec2.describe_security_groups()["SecurityGroups"]
    with open_default() as ledger:
        runs = [r.id for r in ledger.list()]
    return {
        "instances": live_instances(ec2),
        "roles": [r["RoleName"] for r in iam.list_roles()["Roles"]],
        "profiles": [
            p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]
        ],
        "cluster groups": [g["GroupName"] for g in groups if "cluster" in g["GroupName"]],
        "runs": runs,
    }


NOTHING = {"instances": [], "roles": [], "profiles": [], "cluster groups": [], "runs": []}


def test_throttled_calls_across_the_launch_are_retried(ec2_aws, tiny_dataset):
    """RunInstances, DescribeInstances, CreateSecurityGroup, CreateRole and the dataset's S3
    upload each throttled: the launch still starts exactly one instance."""
    for action, code in [
        ("RunInstances", "RequestLimitExceeded"),
        ("DescribeInstances", "RequestLimitExceeded"),
        ("CreateSecurityGroup", "RequestLimitExceeded"),
        ("CreateRole", "Throttling"),
        ("PutObject", "SlowDown"),
    ]:
        ec2_aws.add(Fault(action, code, status=503, times=2))
    res = _launch(tiny_dataset)
    assert res.exit_code == 0, res.output
    run_id = _run_id(res.output)
    assert len(instances_of(run_id, LIVE)) == 1
    assert len(ec2_aws.sent("CreateSecurityGroup")) == 3 and len(ec2_aws.sent("CreateRole")) == 3
    assert len(ec2_aws.sleeps) >= 10  # every throttled call waited before its next try
    assert all(f.times == 0 for f in ec2_aws.faults)  # each fault was met
    assert CliRunner().invoke(app, ["runs", "stop", run_id]).exit_code == 0


@pytest.mark.parametrize(
    "action, code, said",
    [
        ("RunInstances", "RequestLimitExceeded", "throttled RunInstances for g5.xlarge"),
        ("PutObject", "SlowDown", "SlowDown"),  # the dataset's upload, before any instance
    ],
)
def test_throttling_to_the_end_says_how_often_and_leaves_nothing(
    ec2_aws, tiny_dataset, action, code, said
):
    ec2_aws.add(Fault(action, code, status=503, times=99))
    res = _launch(tiny_dataset, "--count", "2")
    assert res.exit_code == 6, res.output
    tries = len([r for r in ec2_aws.requests if action in (r.get("Action"), r.get("S3Action"))])
    assert said in res.output and f"on all {tries} attempts" in res.output
    assert "To fix:" in res.output and "Traceback" not in res.output
    assert _left_behind() == NOTHING


@pytest.mark.parametrize(
    "code", ["InsufficientInstanceCapacity", "VcpuLimitExceeded", "InstanceLimitExceeded"]
)
def test_a_two_host_run_without_capacity_or_quota_leaves_nothing(ec2_aws, tiny_dataset, code):
    """Both hosts come from one RunInstances (MinCount = MaxCount = 2): EC2 starts both or
    none, so no first host is left waiting for a second; the run's role, profile and cluster
    group go with the error, and the user is told what to do."""
    ec2_aws.add(Fault("RunInstances", code, status=400, times=99))
    res = _launch(tiny_dataset, "--count", "2")
    assert res.exit_code == 6, res.output
    sent = ec2_aws.sent("RunInstances")
    assert sent and all((r["MinCount"], r["MaxCount"]) == ("2", "2") for r in sent)
    if code == "InsufficientInstanceCapacity":  # every zone tried, each named
        assert len(sent) > 1 and res.output.count(code) == len(sent)
    else:  # a quota is the account's: no other zone is tried
        assert len(sent) == 1 and "2 x g5.xlarge" in res.output
        assert "Service Quotas" in res.output and "reached max retries" not in res.output
    assert "To fix:" in res.output and "Traceback" not in res.output
    assert _left_behind() == NOTHING


def test_an_instance_that_landed_on_the_last_try_is_terminated(ec2_aws, tiny_dataset):
    """RunInstances fails on every try, but the last one did start the instance (its reply
    was lost): the launch failed and the ledger forgets the run, so the instance must go too."""
    ec2_aws.add(Fault("RunInstances", "InternalError", times=3))
    ec2_aws.add(Fault("RunInstances", "InternalError", after=True))
    res = _launch(tiny_dataset)
    assert res.exit_code == 6 and "To fix:" in res.output, res.output
    assert _left_behind() == NOTHING  # (the fixture checks no instance is left, too)


def _ec2_ends(instance_id: str, code: str, message: str) -> None:
    """EC2 takes the instance back (moto's own terminate says the user did: set its reason)."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.instances import StateReason

    boto3.client("ec2", region_name=REGION).terminate_instances(InstanceIds=[instance_id])
    instance = ec2_backends[ACCOUNT][REGION].get_instance(instance_id)
    instance.state_reason = StateReason(f"{code}: {message}", code)


@pytest.mark.parametrize("agent", ["silent", "starting"])
def test_a_spot_reclaim_during_boot_is_relaunched_and_not_billed(ec2_aws, tiny_dataset, agent):
    """The instance is reclaimed before the agent wrote anything, or while it prepares."""
    res = _launch(tiny_dataset, "--spot", "--max-restarts", "1")
    run_id = _run_id(res.output)
    [first] = instances_of(run_id, LIVE)
    if agent == "starting":
        agent_says(run_id, "starting", 1)
    _ec2_ends(first["InstanceId"], *SPOT_RECLAIM)
    res = CliRunner().invoke(app, ["runs", "show", run_id])
    assert res.exit_code == 0, res.output
    [second] = instances_of(run_id, LIVE)
    assert second["InstanceId"] != first["InstanceId"]
    with open_default() as ledger:
        run = ledger.get(run_id)
    assert run.status == "submitted" and run.backend_ref == second["InstanceId"]
    [charge] = run.charges  # EC2 interrupted it in its first hour: that hour is not billed
    assert charge["interrupted_by_ec2"] and charge["label"].endswith("interrupted)")
    assert CliRunner().invoke(app, ["runs", "stop", run_id]).exit_code == 0


def test_one_host_reclaimed_while_booting_and_the_relaunch_throttled(ec2_aws, tiny_dataset):
    """Two spot hosts; EC2 takes algo-2 back while it boots and the relaunch is throttled to
    the end: algo-1 is terminated too (a cluster cannot lose a host), the run ends
    interrupted (not billed: EC2 interrupted it) saying how to resume, and nothing stays."""
    res = _launch(tiny_dataset, "--spot", "--max-restarts", "2", "--count", "2")
    run_id = _run_id(res.output)
    first, second = sorted(instances_of(run_id, LIVE), key=lambda i: i["AmiLaunchIndex"])
    _ec2_ends(second["InstanceId"], *SPOT_RECLAIM)
    ec2_aws.add(Fault("RunInstances", "RequestLimitExceeded", status=503, times=99))
    res = CliRunner().invoke(app, ["runs", "show", run_id])
    assert res.exit_code == 0, res.output
    with open_default() as ledger:
        run = ledger.get(run_id)
    assert run.status == "interrupted" and "algo-2" in run.exit_reason
    assert "relaunch failed: AWS throttled RunInstances" in run.exit_reason
    assert f"finetune launch --resume {run_id}` continues it" in run.exit_reason
    assert [c["interrupted_by_ec2"] for c in run.charges] == [True]
    ec2_aws.faults.clear()
    states = {i["InstanceId"]: i["State"]["Name"] for i in instances_of(run_id)}
    assert states[first["InstanceId"]] in ("shutting-down", "terminated")
    assert {**_left_behind(), "runs": []} == NOTHING


def test_ec2_ending_an_on_demand_instance_during_boot_is_an_interruption(ec2_aws, tiny_dataset):
    """Server.InternalError while it boots: EC2's doing, not the dead-man switch or a bad
    image -- the run is interrupted and resumable, not failed, and says so (its sync's
    DescribeInstances throttled once on the way)."""
    res = _launch(tiny_dataset)
    run_id = _run_id(res.output)
    [inst] = instances_of(run_id, LIVE)
    _ec2_ends(inst["InstanceId"], "Server.InternalError", "Internal error on launch")
    # the look at its instances (DescribeInstances by id) is throttled, and retried
    by_id = lambda params: "InstanceId.1" in params  # noqa: E731
    ec2_aws.add(Fault("DescribeInstances", "RequestLimitExceeded", status=503, when=by_id))
    res = CliRunner().invoke(app, ["runs", "show", run_id])
    assert res.exit_code == 0, res.output
    with open_default() as ledger:
        run = ledger.get(run_id)
    assert run.status == "interrupted", run.exit_reason
    assert "EC2 itself ended the instance" in run.exit_reason
    assert "dead-man" not in run.exit_reason and "--max-runtime" not in run.exit_reason
    assert f"finetune launch --resume {run_id}" in run.exit_reason
    assert instances_of(run_id, LIVE) == []
    assert _left_behind()["roles"] == []  # the run ended: its role went with it
    assert ec2_aws.faults[-1].times == 0


def test_a_spot_notice_before_the_trainer_starts_ends_the_attempt_interrupted(
    ec2_aws, fake_imds, tiny_dataset, tmp_path
):
    """The notice is up while the agent prepares: it starts no trainer on an instance EC2 is
    taking back, and ends the attempt interrupted by spot (resumable), exit code 75."""
    from finetune.backends.ec2.agent import protocol as p

    from .agent_env import fill_prefix, make_plan, s3_text, start_agent, status

    env = fill_prefix(make_plan(tiny_dataset), "ft-20261127-000000-boot")
    fake_imds.schedule_notice()
    agent = start_agent(env, tmp_path / "ml", fake_imds.url)
    assert agent.wait(60) == p.EXIT_INTERRUPTED
    doc = status(env[p.ENV_PREFIX])
    assert doc["state"] == p.INTERRUPTED and doc["interruption"] == "spot"
    assert doc["epochs_done"] == 0
    log = s3_text(env[p.ENV_PREFIX], p.LOG)
    assert "before the trainer started" in log and "trainer started (pid" not in log
