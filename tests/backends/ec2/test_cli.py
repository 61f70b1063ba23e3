"""`finetune launch --backend ec2`, `runs stop` and `cleanup` as a user types them."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import boto3
from typer.testing import CliRunner

from finetune.backends.ec2.request import RUN_TAG
from finetune.cli import app
from finetune.runs.ledger import open_default

from .conftest import REGION, live_instances, stand_in_ami
from .control import instances_of

LIVE = ["pending", "running", "stopping", "stopped"]


def _launch(dataset, *extra):
    args = ["launch", "smoke-resnet18", "--dataset", str(dataset), "--backend", "ec2"]
    return CliRunner().invoke(app, [*args, *extra])


def _run_id(output: str) -> str:
    return re.search(r"Run (ft-[\w-]+) started", output)[1]


def test_launch_detach_then_stop(ec2_aws, tiny_dataset):
    res = _launch(
        tiny_dataset,
        "--instance",
        "g5.xlarge",
        "--spot",
        "--max-runtime",
        "2h",
        "--az",
        "us-east-1b",
        "--detach",
    )
    assert res.exit_code == 0, res.output
    run_id = _run_id(res.output)
    [inst] = instances_of(run_id, LIVE)
    assert inst["Placement"]["AvailabilityZone"] == "us-east-1b"
    assert "DEADMAN_SECONDS=8100" in _sent_user_data(ec2_aws)
    res = CliRunner().invoke(app, ["runs", "stop", run_id])
    assert res.exit_code == 0, res.output
    assert instances_of(run_id, LIVE) == []
    res = CliRunner().invoke(app, ["runs", "show", run_id])
    assert "stopped" in res.output


def test_launch_needs_an_instance(ec2_aws, tiny_dataset):
    res = _launch(tiny_dataset)
    assert res.exit_code == 2 and "--instance" in res.output and "To fix:" in res.output
    assert ec2_aws.sent("RunInstances") == []


def test_launch_two_hosts_one_request_self_only_group_and_hosts_map(ec2_aws, tiny_dataset):
    import json

    import boto3

    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--count", "2", "--detach")
    assert res.exit_code == 0, res.output
    (req,) = ec2_aws.sent("RunInstances")  # one request: all hosts or none
    assert (req["MinCount"], req["MaxCount"]) == ("2", "2")
    ec2 = boto3.client("ec2", region_name=REGION)
    pages = ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": [RUN_TAG]}])
    first = pages["Reservations"][0]["Instances"][0]
    run_id = next(t["Value"] for t in first["Tags"] if t["Key"] == RUN_TAG)
    gids = [g["GroupId"] for g in first["SecurityGroups"]]
    (group,) = ec2.describe_security_groups(GroupIds=gids)["SecurityGroups"]
    (rule,) = group["IpPermissions"]  # TCP from the group itself, never from a CIDR
    assert rule["IpProtocol"] == "tcp" and not rule["IpRanges"] and not rule["Ipv6Ranges"]
    assert [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [group["GroupId"]]
    live = instances_of(run_id, LIVE)
    assert len(live) == 2
    names = {t["Value"] for i in live for t in i["Tags"] if t["Key"] == "finetune:host"}
    assert names == {"algo-1", "algo-2"}
    obj = boto3.client("s3", region_name=REGION).get_object(
        Bucket=os.environ["FINETUNE_BUCKET"], Key=f"finetune/runs/{run_id}/hosts.json"
    )
    doc = json.loads(obj["Body"].read())
    assert doc["attempt"] == 1 and sorted(doc["hosts"]) == ["algo-1", "algo-2"]
    assert {i["PrivateIpAddress"] for i in live} == set(doc["hosts"].values())
    res = CliRunner().invoke(app, ["runs", "stop", run_id])
    assert res.exit_code == 0, res.output
    assert instances_of(run_id, LIVE) == []


def test_launch_without_bucket_says_how_to_set_one(ec2_aws, tiny_dataset, monkeypatch):
    monkeypatch.delenv("FINETUNE_BUCKET")
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--detach")
    # a pre-flight problem: the same kind and exit code as on the SageMaker backend
    assert res.exit_code == 2 and "FINETUNE_BUCKET" in res.output
    assert ec2_aws.sent("RunInstances") == []
    with open_default() as ledger:
        assert ledger.list() == []  # no "failed" run that never reached AWS


def test_dry_run_launches_nothing(ec2_aws, tiny_dataset):
    ec2_aws.quotas["L-3819A6DF"] = 64  # All G and VT Spot Instance Requests
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--spot", "--dry-run", "--max-eur", "3")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "ec2 g5.xlarge (spot)" in out and re.search(r"region\s+us-east-1", out)
    # the cap: what EUR 3 pays for, or (cheaper) the default cap with where it comes from
    said = " ".join(out.split())
    assert "what --max-eur 3 pays for" in said or "; --max-runtime to change)" in said, out
    assert "euro cap     EUR 3" in out
    assert "All G and VT Spot Instance Requests: 64 vCPUs; this launch needs 4" in " ".join(
        out.split()
    )  # (the row wraps at the terminal's width)
    assert ec2_aws.sent("RunInstances") == []
    with open_default() as ledger:
        assert ledger.list() == []


def test_dry_run_refuses_a_zero_quota_and_says_how_to_raise_it(ec2_aws, tiny_dataset):
    ec2_aws.quotas["L-DB2E81BA"] = 0  # Running On-Demand G and VT instances: a new account
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--dry-run")
    assert res.exit_code == 6, res.output
    assert "'Running On-Demand G and VT instances' in us-east-1 is 0 vCPUs" in res.output
    assert "--quota-code L-DB2E81BA --desired-value 4" in res.output and "To fix:" in res.output
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--detach")  # the launch agrees
    assert res.exit_code == 6 and ec2_aws.sent("RunInstances") == []
    with open_default() as ledger:
        assert ledger.list() == []  # a refused pre-flight leaves no run behind


def test_cleanup_removes_orphans_and_keeps_live_runs(ec2_aws, tiny_dataset):
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--detach")
    live_run = _run_id(res.output)
    dead = ["--run", "ft-20200101-000000-dead"]  # named: not a run of this machine's ledger
    orphan = _orphan_instance("ft-20200101-000000-dead")
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", *dead])
    assert res.exit_code == 0 and orphan in res.output and "Nothing removed" in res.output
    assert orphan in live_instances(_ec2())
    found = json.loads(CliRunner().invoke(app, ["cleanup", "--older-than", "0s", *dead,
                                                "--format", "json"]).stdout)  # fmt: skip
    (mine,) = [r for r in found if r["id"] == orphan]
    assert mine["kind"] == "instance" and mine["run_id"] == "ft-20200101-000000-dead"
    assert set(mine) == {"kind", "id", "run_id", "age_hours", "detail"}  # the table's headers
    assert orphan in live_instances(_ec2())  # listing removes nothing
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", *dead, "--yes"])
    assert res.exit_code == 0 and f"terminated {orphan}" in res.output
    assert live_instances(_ec2()) == [i["InstanceId"] for i in instances_of(live_run, LIVE)]
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "6h", "--yes"])
    assert "Nothing to clean up" in res.output
    CliRunner().invoke(app, ["runs", "stop", live_run])


def test_cleanup_removes_only_the_callers_leftovers_and_says_what_it_skipped(ec2_aws):
    """Issue 23 #11: a shared account holds other users' and CI's runs, which are not in this
    machine's ledger, and resources of other tools that happen to carry project=finetune."""
    mine = _orphan_instance("ft-20200101-000000-aaaa")
    theirs = _orphan_instance("ft-20200101-000000-bbbb", owner="assumed-role/ci/build-17")
    unknown = _orphan_instance("ft-20200101-000000-cccc", owner=None)  # no owner tag
    foreign = _orphan_instance(None, owner=None)  # project=finetune alone: not finetune's
    iam = boto3.client("iam")
    iam.create_instance_profile(InstanceProfileName="finetune-run-ft-20200101-000000-dddd",
                                Path="/finetune/")  # fmt: skip
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes"])
    assert res.exit_code == 0, res.output
    assert "Nothing to clean up" in res.output  # none of them is a run of this machine
    assert "Skipped 5 resource(s) that are not yours to remove" in res.output
    assert f"launched by you ({_me()}) but not from this machine" in res.output
    assert f"launched by assumed-role/ci/build-17, not {_me()}" in res.output
    assert "no finetune:owner tag: its owner is unknown" in res.output
    assert "no finetune:run-id tag: not a finetune run's" in res.output
    assert "IAM profiles carry no owner tag" in res.output
    assert sorted(live_instances(_ec2())) == sorted([mine, theirs, unknown, foreign])
    assert iam.list_instance_profiles(PathPrefix="/finetune/")["InstanceProfiles"]
    # named on purpose: that run, that owner's, then everyone's -- never what is not ours
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes", "--run",
                                   "ft-20200101-000000-aaaa"])  # fmt: skip
    assert f"terminated {mine}" in res.output and f"terminated {theirs}" not in res.output
    res = CliRunner().invoke(
        app, ["cleanup", "--older-than", "0s", "--yes", "--owner", "assumed-role/ci/build-17"]
    )
    assert f"terminated {theirs}" in res.output and unknown in res.output
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes", "--all-owners"])
    assert f"terminated {unknown}" in res.output
    assert "deleted instance profile and role finetune-run-ft-20200101-000000-dddd" in res.output
    assert live_instances(_ec2()) == [foreign]
    assert iam.list_instance_profiles(PathPrefix="/finetune/")["InstanceProfiles"] == []
    _ec2().terminate_instances(InstanceIds=[foreign])  # (the other tool's, ended by its owner)


def test_cleanup_deletes_roles_of_finished_runs(ec2_aws, tiny_dataset):
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--detach")
    run_id = _run_id(res.output)
    for inst in instances_of(run_id, LIVE):  # killed behind finetune's back
        _ec2().terminate_instances(InstanceIds=[inst["InstanceId"]])
    from finetune.runs.ledger import open_default

    with open_default() as ledger:
        ledger.update(run_id, status="failed")
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes"])
    assert f"deleted instance profile and role finetune-run-{run_id}" in res.output
    assert (
        boto3.client("iam").list_instance_profiles(PathPrefix="/finetune/")["InstanceProfiles"]
        == []
    )


def _killed_after_run_instances(layer, dataset) -> tuple[str, str]:
    """A real `finetune launch` process, SIGKILLed the moment EC2 has made its instance (it
    never hears back); returns (run id, instance id)."""
    import subprocess
    import sys

    from .faults import Fault

    cmd = [sys.executable, "-m", "finetune", "launch", "smoke-resnet18", "--dataset",
           str(dataset), "--backend", "ec2", "--instance", "g5.xlarge", "--detach"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    layer.add(Fault("RunInstances", "InternalError", after=True, on_match=lambda _: proc.kill()))
    out = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == -signal.SIGKILL, out
    with open_default() as ledger:
        (run,) = ledger.list()
        assert run.status == "submitted" and run.backend_ref is None  # it never heard back
        assert "intent" in [kind for _, kind, _ in ledger.events(run.id)]
    (inst,) = instances_of(run.id, LIVE)
    return run.id, inst["InstanceId"]


def test_a_launch_killed_after_run_instances_is_found_by_tag_and_stopped(ec2_aws, tiny_dataset):
    run_id, instance = _killed_after_run_instances(ec2_aws, tiny_dataset)
    res = CliRunner().invoke(app, ["runs", "show", run_id])
    assert res.exit_code == 0, res.output
    with open_default() as ledger:
        assert ledger.get(run_id).backend_ref == instance  # reconciled: found by its tags
    res = CliRunner().invoke(app, ["runs", "stop", run_id])
    assert res.exit_code == 0, res.output
    assert instances_of(run_id, LIVE) == []
    with open_default() as ledger:
        assert ledger.get(run_id).status == "stopped"


def test_cleanup_ends_an_abandoned_launch_after_the_grace_period(ec2_aws, tiny_dataset):
    run_id, instance = _killed_after_run_instances(ec2_aws, tiny_dataset)
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes"])
    assert "Nothing to clean up" in res.output  # a launch may still be on its way: wait
    assert [i["InstanceId"] for i in instances_of(run_id, LIVE)] == [instance]
    with open_default() as ledger:  # an hour later, nobody has heard of it
        ledger.update(run_id, created_at=time.time() - 3600)
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes"])
    assert res.exit_code == 0, res.output
    assert f"terminated {instance}" in res.output and "abandoned launch" in res.output
    assert f"deleted instance profile and role finetune-run-{run_id}" in res.output
    assert instances_of(run_id, LIVE) == []
    with open_default() as ledger:
        run = ledger.get(run_id)
        assert run.status == "failed" and run.exit_reason.startswith("abandoned")


def _ec2():
    return boto3.client("ec2", region_name=REGION)


def _sent_user_data(layer) -> str:
    import base64

    return base64.b64decode(layer.sent("RunInstances")[-1]["UserData"]).decode()


def _me() -> str:
    """The caller's identity as finetune tags it (moto's caller: user/moto)."""
    from finetune.backends.ec2.setup.infra import owner

    return owner(boto3.client("sts", region_name=REGION))


def _orphan_instance(run_id: str | None, owner: str | None = "") -> str:
    """An instance a crashed finetune left behind: tagged as finetune tags (owner "": the
    caller's own identity; None: no owner tag, run_id None: no run tag), no run in the ledger."""
    ec2 = _ec2()
    ami = stand_in_ami(ec2)
    tags = [{"Key": "project", "Value": "finetune"}]
    if run_id is not None:
        tags.append({"Key": "finetune:run-id", "Value": run_id})
    if owner is not None:
        tags.append({"Key": "finetune:owner", "Value": owner or _me()})
    inst = ec2.run_instances(
        ImageId=ami,
        MinCount=1,
        MaxCount=1,
        InstanceType="g5.xlarge",
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    return inst["Instances"][0]["InstanceId"]


def _orphan_spot_request(run_id: str) -> None:
    """An open spot request a crashed finetune of this caller left (tagged as finetune tags)."""
    ec2 = _ec2()
    ami = stand_in_ami(ec2)
    tags = [{"Key": "project", "Value": "finetune"}, {"Key": "finetune:run-id", "Value": run_id}]
    tags.append({"Key": "finetune:owner", "Value": _me()})
    ec2.request_spot_instances(
        LaunchSpecification={"ImageId": ami, "InstanceType": "g5.xlarge"},
        TagSpecifications=[{"ResourceType": "spot-instances-request", "Tags": tags}],
    )


def test_caller_policy_in_infra_grants_exactly_the_calls_we_make(ec2_aws, tiny_dataset):
    """Launch (one host and two), follow a relaunch, stop and clean up: the actions sent on
    the wire (S3 included, and what RunInstances implies) are exactly the EC2 caller
    policy's, and every S3 call is allowed on the key it touched."""
    from finetune.aws import infra
    from tests.security.iam_eval import Request, allowed
    from tests.security.wire import query_actions, s3_calls, statement_actions

    from .conftest import ACCOUNT, BUCKET
    from .control import agent_says

    _orphan_spot_request("ft-20200101-000000-dead")  # for cleanup to cancel
    start = len(ec2_aws.requests)
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--spot", "--detach")
    run_id = _run_id(res.output)
    agent_says(run_id, "interrupted", 1, reason="notice", interruption="spot")
    CliRunner().invoke(app, ["runs", "show", run_id])  # syncs: relaunch
    CliRunner().invoke(app, ["runs", "stop", run_id])
    CliRunner().invoke(app, ["runs", "show", run_id])
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--count", "2", "--detach")
    CliRunner().invoke(app, ["runs", "stop", _run_id(res.output)])
    CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes", "--run",
                             "ft-20200101-000000-dead"])  # fmt: skip
    checked = CliRunner().invoke(app, ["check", "--backend", "ec2"])  # issue 49, S5-6
    assert "could not be read" not in checked.output, checked.output
    names = infra.Names(account=ACCOUNT, region=REGION, bucket=BUCKET)
    policy = infra.render(infra.policy_document("ec2-caller"), names)
    s3 = s3_calls(ec2_aws.http[start:])
    sent = query_actions(ec2_aws.requests[start:]) | {action for action, _ in s3}
    assert {"ec2:RunInstances", "iam:CreateRole", "ec2:AuthorizeSecurityGroupIngress"} <= sent
    assert {"iam:GetPolicy", "servicequotas:GetServiceQuota"} <= sent  # check and pre-flight
    # cleanup also asks the SageMaker backend for its run roles (iam:ListRoles): an EC2-only
    # caller is refused it, and that backend then has nothing to clean (issue 23, 13)
    assert "iam:ListRoles" in sent
    sent -= {"iam:ListRoles"}
    # the shared dataset upload aborts a failed multipart upload (tests/aws exercises it)
    assert sent | {"s3:AbortMultipartUpload"} == statement_actions(policy)
    for action, arn in s3:
        assert allowed(policy, Request(action, arn, {"s3:prefix": "finetune/"})), (action, arn)
    creates = [r for r in ec2_aws.requests[start:] if r.get("Action") == "CreateRole"]
    assert creates and all(
        r["PermissionsBoundary"] == infra.boundary_arn(ACCOUNT, REGION, "ec2") for r in creates
    )


def test_launch_from_a_dataset_already_in_s3_uploads_nothing(ec2_aws, tiny_dataset):
    """--dataset s3://PREFIX/ (what an earlier launch uploaded): the plan comes from the
    manifest stored there, and the instance is pointed at that prefix; nothing is re-sent."""
    from finetune.aws.s3upload import plan_upload, upload_dataset

    s3 = boto3.client("s3", region_name=REGION)
    upload = plan_upload(str(tiny_dataset), os.environ["FINETUNE_BUCKET"])
    upload_dataset(s3, upload)
    bucket = os.environ["FINETUNE_BUCKET"]

    def datasets():
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return {
            (o["Key"], o["LastModified"])
            for page in pages
            for o in page.get("Contents", [])
            if not o["Key"].startswith("finetune/runs/")
        }

    before = datasets()
    res = _launch(upload.uri, "--instance", "g5.xlarge", "--detach")
    assert res.exit_code == 0, res.output
    run_id = _run_id(res.output)
    assert upload.uri in _sent_user_data(ec2_aws)
    assert datasets() == before  # no second copy, nothing rewritten
    res = CliRunner().invoke(app, ["runs", "stop", run_id])
    assert res.exit_code == 0, res.output
    assert instances_of(run_id, LIVE) == []


def test_launch_from_an_s3_prefix_without_a_dataset(ec2_aws):
    res = _launch(f"s3://{os.environ['FINETUNE_BUCKET']}/nothing-here/", "--instance", "g5.xlarge")
    assert res.exit_code != 0 and "To fix:" in res.output
    assert ec2_aws.sent("RunInstances") == []


def test_a_newer_manifest_in_s3_is_refused_as_such(ec2_aws, tiny_dataset):
    """The manifest stored under an s3:// dataset goes through the same reader as a local
    one: a newer schema version is named, and nothing is launched."""
    import json

    from finetune.aws.s3upload import plan_upload, upload_dataset

    s3 = boto3.client("s3", region_name=REGION)
    upload = plan_upload(str(tiny_dataset), os.environ["FINETUNE_BUCKET"])
    upload_dataset(s3, upload)
    bucket, key = upload.uri[5:].split("/", 1)
    doc = json.loads((tiny_dataset / "manifest.json").read_text())
    doc["schema_version"] = 99
    s3.put_object(Bucket=bucket, Key=f"{key}train/manifest.json", Body=json.dumps(doc))
    res = _launch(upload.uri, "--instance", "g5.xlarge", "--detach")
    assert res.exit_code != 0 and "manifest schema version 99" in res.output
    assert "To fix:" in res.output and ec2_aws.sent("RunInstances") == []


def test_a_spot_launch_asks_the_price_once_and_records_its_zone(ec2_aws, tiny_dataset):
    """The dry run's pre-flight prices the choice; the launch right after uses that answer,
    which has every zone's price, for the runtime cap and the zone it lands in."""
    res = _launch(
        tiny_dataset, "--instance", "g5.xlarge", "--spot", "--az", "us-east-1b", "--detach"
    )
    assert res.exit_code == 0, res.output
    run_id = _run_id(res.output)
    assert len(ec2_aws.sent("DescribeSpotPriceHistory")) == 1
    with open_default() as ledger:
        run = ledger.get(run_id)
        kinds = [kind for _, kind, _ in ledger.events(run_id)]
    (attempt,) = json.loads((Path(run.run_dir) / "ec2.json").read_text())["attempts"]
    assert attempt["az"] == "us-east-1b"
    assert "price in the instance's zone (us-east-1b)" in attempt["price_source"]
    assert kinds.count("intent") == 1 and kinds.count("image") == 1  # written once, by service/
    assert run.plan["runtime"]["ami"] and run.region == REGION
    res = CliRunner().invoke(app, ["runs", "stop", run_id])
    assert res.exit_code == 0, res.output


def test_dry_run_shows_the_runtime_cap_every_cloud_backend_gives(ec2_aws, tiny_dataset):
    """Without --max-runtime: 1.5 x the estimate's slow end, at least 1 h (a tiny set: 1 h,
    as on SageMaker; was 6 h here and 2 h there); --max-runtime, the same flag on both, wins."""
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--dry-run")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())  # (the row wraps at the terminal's width)
    assert "runtime cap 1.00 h (3600 s) (1.5 x the estimate's slow end (" in out, out
    assert "at least 1h 00m; --max-runtime to change)" in out, out
    res = _launch(tiny_dataset, "--instance", "g5.xlarge", "--dry-run", "--max-runtime", "90m")
    assert res.exit_code == 0, res.output
    assert "runtime cap 1.50 h (5400 s) (--max-runtime)" in " ".join(res.output.split())
