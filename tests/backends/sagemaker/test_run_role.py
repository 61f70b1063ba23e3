"""A SageMaker execution role per run (issue 16, defect 3), over HTTP in front of moto: made
with the stack's boundary before the job, passed in CreateTrainingJob, waited for while IAM
propagates it, stored for a resume, deleted when the job ends."""

from __future__ import annotations

import json

import boto3
import pytest

from finetune import service, settings
from finetune.aws.infra import boundary_arn
from finetune.backends.sagemaker.backend import SageMakerBackend
from tests.aws import helpers as h
from tests.aws.conftest import BUCKET, REGION
from tests.aws.gateway import ACCOUNT


@pytest.fixture
def own_roles(cloud, monkeypatch):
    """The settings `finetune infra deploy` prints: no FINETUNE_ROLE_ARN."""
    monkeypatch.delenv("FINETUNE_ROLE_ARN")
    settings.get.cache_clear()
    return cloud


def test_each_run_gets_its_own_bounded_role(own_roles, tiny_dataset, tmp_path):
    plan = h.sm_plan(tiny_dataset)
    run = h.new_run(tmp_path, plan)
    SageMakerBackend().submit(plan, run)
    (create,) = own_roles.requests("CreateRole")
    name = f"finetune-run-{run.id}"
    assert create.form["RoleName"] == name and create.form["Path"] == "/finetune-bounded/sagemaker/"
    assert create.form["PermissionsBoundary"] == boundary_arn(ACCOUNT, REGION, "sagemaker")
    trust = json.loads(create.form["AssumeRolePolicyDocument"])["Statement"][0]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    (job,) = own_roles.requests("CreateTrainingJob")
    assert job.json["RoleArn"] == f"arn:aws:iam::{ACCOUNT}:role/finetune-bounded/sagemaker/{name}"
    assert own_roles.actions().index("PutRolePolicy") < own_roles.actions().index(
        "CreateTrainingJob"
    )
    (put,) = own_roles.requests("PutRolePolicy")
    policy = json.loads(put.form["PolicyDocument"])
    sids = {s["Sid"]: s for s in policy["Statement"]}
    assert sids["SyncOwnCheckpoints"]["Resource"] == [
        f"arn:aws:s3:::{BUCKET}/finetune/checkpoints/{run.id}/*"
    ]
    stored = json.loads((tmp_path / "runs" / run.id / "sagemaker" / "options.json").read_text())
    assert stored["run_role"] is True  # a resume makes the role again


def test_a_role_iam_has_not_propagated_yet_is_waited_for(own_roles, tiny_dataset, tmp_path):
    own_roles.fail("CreateTrainingJob", "ValidationException", "Could not assume role arn:x")
    plan = h.sm_plan(tiny_dataset)
    SageMakerBackend().submit(plan, h.new_run(tmp_path, plan))
    assert len(own_roles.requests("CreateTrainingJob")) == 2 and own_roles.delays == [5.0]


def test_the_role_goes_when_the_job_ends(own_roles, tiny_dataset, tmp_path):
    plan = h.sm_plan(tiny_dataset)
    ledger = h.ledger_at(tmp_path)
    be = SageMakerBackend(poll_seconds=0)
    run = service.submit(plan, be, ledger, ledger.create(h.new_run(tmp_path, plan)))
    iam = boto3.client("iam")
    assert iam.get_role(RoleName=f"finetune-run-{run.id}")
    own_roles.script(h.ON_DEMAND[-1:], job=run.backend_ref.rsplit("/", 1)[1])
    service.sync(run, be, ledger)
    roles = iam.list_roles(PathPrefix="/finetune-bounded/")["Roles"]
    assert [r["RoleName"] for r in roles] == []


def test_a_role_of_your_own_is_used_as_given(cloud, tiny_dataset, tmp_path):
    plan = h.sm_plan(tiny_dataset)
    SageMakerBackend().submit(plan, h.new_run(tmp_path, plan))
    assert cloud.requests("CreateRole") == []
