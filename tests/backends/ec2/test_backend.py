"""The EC2 backend against moto: what we send, capacity and quota failures, idempotency,
relaunch after spot interruptions, stop, cost. The ec2_aws fixture checks on teardown that no
instance tagged by finetune is left pending, running, stopping or stopped."""

from __future__ import annotations

import base64

import boto3
import pytest

from finetune.backends.ec2.options import Ec2Options
from finetune.backends.ec2.state import Ec2State
from finetune.errors import CloudError
from finetune.runs.charges import run_money

from .conftest import REGION
from .control import agent_says, instances_of, launch, sync, terminate
from .faults import Fault

LIVE = ["pending", "running", "stopping", "stopped"]


def _user_data(params: dict) -> str:
    return base64.b64decode(params["UserData"]).decode()


def test_run_instances_request_as_sent(ec2_aws, tiny_dataset, tmp_path):
    run, backend, ledger = launch(tmp_path, tiny_dataset, Ec2Options(max_runtime=3600))
    [sent] = ec2_aws.sent("RunInstances")
    assert sent["MetadataOptions.HttpTokens"] == "required"
    assert sent["MetadataOptions.HttpPutResponseHopLimit"] == "2"
    assert sent["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert sent["InstanceMarketOptions.MarketType"] == "spot"
    assert sent["BlockDeviceMapping.1.Ebs.Encrypted"] == "true"
    assert sent["BlockDeviceMapping.1.Ebs.VolumeType"] == "gp3"
    assert sent["ClientToken"].startswith(run.id)
    tagged = {
        (
            sent[f"TagSpecification.{i}.ResourceType"],
            sent[f"TagSpecification.{i}.Tag.{j}.Key"],
        ): sent[f"TagSpecification.{i}.Tag.{j}.Value"]
        for i in (1, 2, 3)
        for j in range(1, 6)
    }
    for kind in ("instance", "volume", "spot-instances-request"):
        assert tagged[(kind, "finetune:run-id")] == run.id
        assert tagged[(kind, "project")] == "finetune"
        assert tagged[(kind, "finetune:owner")]
    script = _user_data(sent)
    assert "DEADMAN_SECONDS=4500" in script and "systemd-run --on-active" in script
    assert f"RUN_ID={run.id}" in script
    ec2 = boto3.client("ec2", region_name=REGION)
    group = ec2.describe_security_groups(GroupIds=[sent["SecurityGroupId.1"]])["SecurityGroups"]
    assert group[0]["IpPermissions"] == []  # no public (or any) ingress
    assert not any(k.startswith("SecurityGroupIngress") for r in ec2_aws.requests for k in r)
    policy = boto3.client("iam").get_role_policy(
        RoleName=sent["IamInstanceProfile.Name"], PolicyName="run-access"
    )["PolicyDocument"]
    resources = [r for s in policy["Statement"] for r in s["Resource"]]
    assert f"arn:aws:s3:::finetune-test-bucket/finetune/runs/{run.id}/*" in resources
    assert ledger.get(run.id).backend_ref == instances_of(run.id)[0]["InstanceId"]
    backend.stop(ledger.get(run.id))
    assert instances_of(run.id, LIVE) == []


def test_capacity_errors_move_on_to_other_zones(ec2_aws, tiny_dataset, tmp_path):
    ec2_aws.add(Fault("RunInstances", "InsufficientInstanceCapacity", times=2))
    run, backend, ledger = launch(tmp_path, tiny_dataset)
    zones = [_zone(r["SubnetId"]) for r in ec2_aws.sent("RunInstances")]
    assert len(zones) == 3 and len(set(zones)) == 3
    state = Ec2State.load(run.run_dir)
    assert len(state.tried) == 2 and all("InsufficientInstanceCapacity" in t for t in state.tried)
    assert len(instances_of(run.id, LIVE)) == 1
    backend.stop(ledger.get(run.id))


def test_no_capacity_anywhere_says_what_was_tried(ec2_aws, tiny_dataset, tmp_path):
    ec2_aws.add(Fault("RunInstances", "InsufficientInstanceCapacity", times=99))
    with pytest.raises(CloudError) as err:
        launch(tmp_path, tiny_dataset, Ec2Options(az=("us-east-1a", "us-east-1b")))
    text = str(err.value)
    assert "us-east-1a" in text and "us-east-1b" in text and "To fix:" in text
    assert len(ec2_aws.sent("RunInstances")) == 2


def test_quota_error_stops_at_once_with_a_fix(ec2_aws, tiny_dataset, tmp_path):
    ec2_aws.add(Fault("RunInstances", "MaxSpotInstanceCountExceeded", status=400, times=9))
    with pytest.raises(CloudError) as err:
        launch(tmp_path, tiny_dataset)
    assert "Service Quotas" in str(err.value)
    assert len(ec2_aws.sent("RunInstances")) == 1


def test_lost_reply_does_not_start_a_second_instance(ec2_aws, tiny_dataset, tmp_path):
    ec2_aws.add(Fault("RunInstances", "ServiceUnavailable", status=503, after=True))
    run, backend, ledger = launch(tmp_path, tiny_dataset)
    assert len(ec2_aws.sent("RunInstances")) == 1  # the retry found the instance by its tags
    assert len(instances_of(run.id)) == 1
    backend.stop(ledger.get(run.id))


def test_retried_submit_adopts_the_live_instance(ec2_aws, tiny_dataset, tmp_path):
    run, backend, ledger = launch(tmp_path, tiny_dataset)
    (tmp_path / "x").write_text("")
    # the state file lost (crash before it was written): the tag lookup still finds it
    state = Ec2State.load(run.run_dir)
    state.attempts.clear()
    state.save(run.run_dir)
    from finetune.plan import Plan

    ref = backend.submit(Plan.model_validate(run.plan), ledger.get(run.id))
    assert len(instances_of(run.id)) == 1 and ref == instances_of(run.id)[0]["InstanceId"]
    assert len(ec2_aws.sent("RunInstances")) == 1
    backend.stop(ledger.get(run.id))


def test_completed_run_terminates_and_records_cost(ec2_aws, tiny_dataset, tmp_path):
    run, backend, ledger = launch(tmp_path, tiny_dataset)
    agent_says(run.id, "running", 1, epochs_done=1, images_per_sec=812.5)
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "running" and "812.5 img/s" in status.detail
    agent_says(run.id, "completed", 1, ended_at=None)
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "completed" and run.status == "completed"
    assert instances_of(run.id, LIVE) == []  # the control side made sure
    (charge,) = run.charges  # what the backend reports: usage and the price, never euros
    assert charge["market"] == "spot" and charge["rule"] == "ec2" and "eur" not in charge
    az = Ec2State.load(run.run_dir).attempts[0].az  # the spot price of the zone it landed in
    assert (
        charge["usd_per_hour"] and f"price in the instance's zone ({az})" in charge["price_source"]
    )
    assert len(ec2_aws.sent("DescribeSpotPriceHistory")) == 1  # asked once: every zone
    in_zone = boto3.client("ec2", region_name=REGION).describe_spot_price_history(
        InstanceTypes=[charge["instance_type"]],
        ProductDescriptions=["Linux/UNIX"],
        Filters=[{"Name": "availability-zone", "Values": [az]}],
    )["SpotPriceHistory"]
    assert charge["usd_per_hour"] == float(max(in_zone, key=lambda i: i["Timestamp"])["SpotPrice"])
    m = run_money(run)
    assert m.billed_seconds == 60 and run.interrupted_seconds == 0  # EC2's minimum
    assert m.eur == pytest.approx(60 * charge["usd_per_hour"] / 3600 / m.rate.usd_per_eur)
    roles = boto3.client("iam").list_roles(PathPrefix="/finetune/")["Roles"]
    assert roles == []  # the per-run role is gone with the run


def test_spot_interruption_relaunches_and_counts_interrupted_time(ec2_aws, tiny_dataset, tmp_path):
    run, backend, ledger = launch(tmp_path, tiny_dataset, Ec2Options(max_restarts=2))
    first = run.backend_ref
    agent_says(run.id, "interrupted", 1, reason="spot interruption notice", interruption="spot")
    terminate(first)
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "submitted" and "relaunch 1 of at most 2" in status.detail
    second = instances_of(run.id, LIVE)
    assert len(second) == 1 and second[0]["InstanceId"] != first
    attempt_tags = {t["Key"]: t["Value"] for t in second[0]["Tags"]}
    assert attempt_tags["finetune:attempt"] == "2"
    relaunch = ec2_aws.sent("RunInstances")[-1]
    assert "FINETUNE_AGENT_ATTEMPT" in _user_data(relaunch) and "ATTEMPT=2" in _user_data(relaunch)
    agent_says(run.id, "completed", 2)
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "completed"
    first_attempt, second_attempt = run.charges
    assert first_attempt["interrupted_by_ec2"] and "interrupted" in first_attempt["label"]
    assert not second_attempt["interrupted_by_ec2"] and "completed" in second_attempt["label"]
    # the attempt EC2 interrupted within its first hour is free (AWS's spot billing rules);
    # the second is billed its 60 s minimum
    assert run.interrupted_seconds is not None and run_money(run).billed_seconds == 60
    assert any(kind == "relaunch" for _, kind, _ in ledger.events(run.id))


def test_restart_budget_ends_the_run_as_interrupted(ec2_aws, tiny_dataset, tmp_path):
    run, backend, ledger = launch(tmp_path, tiny_dataset, Ec2Options(max_restarts=0))
    agent_says(run.id, "interrupted", 1, reason="spot interruption notice", interruption="spot")
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "interrupted" and "--max-restarts 0" in status.reason
    assert instances_of(run.id, LIVE) == []
    assert sync(run, backend, ledger)[1].state == "interrupted"  # no relaunch on a later look


def test_relaunch_falls_back_to_on_demand_when_allowed(ec2_aws, tiny_dataset, tmp_path):
    opts = Ec2Options(max_restarts=1, allow_on_demand_fallback=True, az=("us-east-1a",))
    run, backend, ledger = launch(tmp_path, tiny_dataset, opts)
    ec2_aws.add(
        Fault(
            "RunInstances",
            "InsufficientInstanceCapacity",
            times=9,
            when=lambda params: params.get("InstanceMarketOptions.MarketType") == "spot",
        )
    )
    agent_says(run.id, "interrupted", 1, reason="notice", interruption="spot")
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "submitted"
    last = ec2_aws.sent("RunInstances")[-1]
    assert "InstanceMarketOptions.MarketType" not in last
    state = Ec2State.load(run.run_dir)
    assert state.current.spot is False and state.tried
    backend.stop(ledger.get(run.id))
    assert sync(run, backend, ledger)[1].state == "stopped"


def test_instance_gone_without_a_result_is_a_failure(ec2_aws, tiny_dataset, tmp_path):
    run, backend, ledger = launch(tmp_path, tiny_dataset, spot=False)
    terminate(run.backend_ref)  # e.g. the dead-man switch, or a failed image pull
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "failed" and "dead-man switch" in status.reason
    assert run.ended_at is not None


def test_stop_terminates_and_ends_as_stopped(ec2_aws, tiny_dataset, tmp_path):
    run, backend, ledger = launch(tmp_path, tiny_dataset)
    backend.stop(ledger.get(run.id))
    assert instances_of(run.id, LIVE) == []
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "stopped" and run.status == "stopped"


def _zone(subnet_id: str) -> str:
    ec2 = boto3.client("ec2", region_name=REGION)
    return ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]["AvailabilityZone"]


def test_a_sigterm_that_is_not_spot_is_not_relaunched(ec2_aws, tiny_dataset, tmp_path):
    """The dead-man switch powers the instance off: the agent sees SIGTERM and reports an
    interruption, but relaunching would only hit the same limit again."""
    run, backend, ledger = launch(tmp_path, tiny_dataset, Ec2Options(max_restarts=3))
    agent_says(run.id, "interrupted", 1, reason="SIGTERM received", interruption="signal")
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "interrupted" and "--resume" in status.reason
    assert len(ec2_aws.sent("RunInstances")) == 1
    assert instances_of(run.id, LIVE) == []
