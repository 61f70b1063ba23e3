"""Issue 49 (the probe's EC2 DEFECT, S5-10): a launch that fails leaves nothing a user
cannot see, stop or clean, and `cleanup` removes only what is this machine's.

- RunInstances' reply lost and DescribeInstances failing: every undo step still runs, the
  run stays in the ledger (failed, saying what AWS may still hold and how to clean it), and
  a plain `finetune cleanup` -- no --older-than -- ends the instance once AWS answers.
- A run's role and instance profile carry their owner, as its instances do.
- A live run of the same AWS identity launched from another machine (another ledger) is
  never ended by this machine's `cleanup --yes`, only when named (--run)."""

from __future__ import annotations

import re

import boto3
from typer.testing import CliRunner

from finetune import settings
from finetune.cli import app
from finetune.runs.ledger import open_default

from .conftest import REGION, live_instances
from .control import instances_of
from .faults import Fault

LIVE = ["pending", "running", "stopping", "stopped"]


def _launch(dataset, *extra):
    args = ["launch", "smoke-resnet18", "--dataset", str(dataset), "--backend", "ec2"]
    return CliRunner().invoke(app, [*args, "--instance", "g5.xlarge", "--detach", *extra])


def _iam():
    return boto3.client("iam", region_name=REGION)


def _profiles() -> list[str]:
    return [p["InstanceProfileName"] for p in _iam().list_instance_profiles()["InstanceProfiles"]]


def _me() -> tuple[str, str]:
    """The caller as finetune tags it: (ARN tail, aws:userid)."""
    who = boto3.client("sts", region_name=REGION).get_caller_identity()
    return who["Arn"].rsplit(":", 1)[-1], who["UserId"]


def test_a_lost_reply_and_a_failing_describe_leave_a_run_that_cleanup_ends(ec2_aws, tiny_dataset):
    """RunInstances starts the instance but its reply is lost; from then on DescribeInstances
    fails (the launch's look for it, and the undo's). The error names the instance, the
    role, profile and groups still go (each undo step runs on its own), the ledger keeps the
    run as failed, and `finetune cleanup` (default --older-than 6h) ends the instance: the
    run is this ledger's and ended, whatever the instance's age."""
    describe_fails = Fault("DescribeInstances", "InternalError", status=500, times=10_000)
    ec2_aws.add(Fault("RunInstances", "InternalError", after=True,
                      on_match=lambda _: ec2_aws.add(describe_fails)))  # fmt: skip
    res = _launch(tiny_dataset)
    assert res.exit_code == 6 and "Traceback" not in res.output, res.output
    said = " ".join(res.output.split())
    assert "an instance RunInstances may have started" in said
    with open_default() as ledger:
        (run,) = ledger.list()
    assert f"tags finetune:run-id={run.id}, finetune:attempt=1" in said
    assert "`finetune cleanup` removes what is left" in said
    assert run.status == "failed" and "AWS may still hold an instance" in run.exit_reason
    assert _profiles() == [] and _iam().list_roles()["Roles"] == []  # undone all the same
    ec2_aws.faults.clear()  # AWS answers again
    (instance,) = [i["InstanceId"] for i in instances_of(run.id, LIVE)]  # it runs
    res = CliRunner().invoke(app, ["cleanup", "--yes"])
    assert res.exit_code == 0, res.output
    assert f"terminated {instance}" in res.output
    assert instances_of(run.id, LIVE) == []


def test_a_runs_role_and_profile_carry_their_owner(ec2_aws, tiny_dataset):
    """Tagged at creation like its instances: `cleanup --owner` of the caller removes the
    profile of a run no ledger knows any more (it used to say profiles carry no owner)."""
    res = _launch(tiny_dataset)
    assert res.exit_code == 0, res.output
    run_id = re.search(r"Run (ft-[\w-]+) started", res.output)[1]
    (name,) = _profiles()
    arn, userid = _me()
    profile = _iam().get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    role = _iam().list_role_tags(RoleName=name)["Tags"]
    for tags in (profile["Tags"], role):
        found = {t["Key"]: t["Value"] for t in tags}
        assert found["finetune:owner"] == arn and found["finetune:owner-id"] == userid
        assert found["finetune:run-id"] == run_id
    for inst in instances_of(run_id, LIVE):  # ended behind finetune's back, run forgotten
        boto3.client("ec2", region_name=REGION).terminate_instances(
            InstanceIds=[inst["InstanceId"]]
        )
    with open_default() as ledger:
        ledger.delete(run_id)
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes"])
    assert "launched by you" in res.output and _profiles() == [name]  # not this ledger's
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes", "--owner", arn])
    assert f"deleted instance profile and role {name}" in res.output, res.output
    assert _profiles() == []


def test_cleanup_never_ends_a_live_run_of_the_same_identity_from_another_machine(
    ec2_aws, tiny_dataset, tmp_path, monkeypatch
):
    """S5-10: a laptop and a CI box under one IAM user. The laptop's live run, old enough
    (--older-than 0s stands for the default 6 h), is listed by the CI box's cleanup as
    another machine's and left running; only naming it (--run) ends it."""
    res = _launch(tiny_dataset)  # the laptop (its own ledger)
    run_id = re.search(r"Run (ft-[\w-]+) started", res.output)[1]
    (instance,) = [i["InstanceId"] for i in instances_of(run_id, LIVE)]
    laptop = settings.get().data_dir
    monkeypatch.setenv("FINETUNE_DATA_DIR", str(tmp_path / "ci-box"))
    settings.get.cache_clear()
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes"])
    assert res.exit_code == 0, res.output
    assert "Nothing to clean up" in res.output and f"terminated {instance}" not in res.output
    said = " ".join(res.output.split())
    assert f"{instance}" in said and "but not from this machine" in said
    assert f"--run {run_id}" in said
    assert live_instances(boto3.client("ec2", region_name=REGION)) == [instance]
    res = CliRunner().invoke(app, ["cleanup", "--older-than", "0s", "--yes", "--run", run_id])
    assert f"terminated {instance}" in res.output, res.output
    assert f"deleted instance profile and role finetune-run-{run_id}" in res.output
    monkeypatch.setenv("FINETUNE_DATA_DIR", str(laptop))
    settings.get.cache_clear()
    assert instances_of(run_id, LIVE) == []
