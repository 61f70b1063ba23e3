"""Per-run roles, evaluated (issue 16, defect 3): a SageMaker run's role writes its own
outputs and checkpoints only, reads its dataset only, and can never delete object versions
(the versioned bucket keeps what a run overwrote); the boundary caps it as well."""

from __future__ import annotations

import pytest
import yaml

from finetune.aws import infra
from finetune.backends.sagemaker import runrole
from finetune.backends.sagemaker.request import job_name

from .iam_eval import AS_SAGEMAKER, Request, allowed

ACCOUNT, REGION, BUCKET = "123456789012", "eu-west-1", "finetune-test-bucket"
RUN, OTHER = "ft-20261122-101500-a3f9", "ft-20261122-101501-b4e0"
OBJ = f"arn:aws:s3:::{BUCKET}/finetune"
DATASET = "finetune/datasets/shapes-ec0c329c5a10/"
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/finetune@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def role() -> tuple[dict, dict]:
    boundary = infra.render(
        infra.policy_document("sagemaker-boundary"), infra.Names(ACCOUNT, REGION, BUCKET)
    )
    return runrole.policy(RUN, BUCKET, [DATASET], IMAGE, REGION, ACCOUNT), boundary


def _can(role, action, resource, **ctx) -> bool:
    doc, boundary = role
    return allowed(doc, Request(action, resource, {**AS_SAGEMAKER, **ctx}), boundary)


def test_a_run_writes_its_own_outputs_and_checkpoints(role):
    for job in (job_name(RUN), job_name(RUN, 2)):
        assert _can(role, "s3:PutObject", f"{OBJ}/output/{job}/output/model.tar.gz")
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        assert _can(role, action, f"{OBJ}/checkpoints/{RUN}/epoch-3/params")
    assert _can(role, "s3:GetObject", f"{OBJ}/datasets/shapes-ec0c329c5a10/train/x.rec")
    assert _can(role, "ecr:BatchGetImage", f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/finetune")


def test_a_run_writes_its_tensorboard_files_where_sagemaker_uploads_them(role):
    from finetune.backends.sagemaker.request import tensorboard_uri

    key = tensorboard_uri(BUCKET, RUN).removeprefix(f"s3://{BUCKET}/") + "events.out.tfevents.1"
    assert key.startswith(f"finetune/output/{job_name(RUN)}/tensorboard/")
    assert _can(role, "s3:PutObject", f"arn:aws:s3:::{BUCKET}/{key}")
    other = tensorboard_uri(BUCKET, OTHER).removeprefix(f"s3://{BUCKET}/") + "events.out.x"
    assert not _can(role, "s3:PutObject", f"arn:aws:s3:::{BUCKET}/{other}")


def test_a_run_cannot_touch_another_runs_data(role):
    assert not _can(role, "s3:PutObject", f"{OBJ}/output/{job_name(OTHER)}/output/model.tar.gz")
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        assert not _can(role, action, f"{OBJ}/checkpoints/{OTHER}/epoch-3/params")
    assert not _can(role, "s3:GetObject", f"{OBJ}/datasets/someone-else-0123/train/x.rec")
    assert not _can(role, "s3:GetObject", f"{OBJ}/output/{job_name(OTHER)}/output/model.tar.gz")
    listing = f"arn:aws:s3:::{BUCKET}"
    assert _can(role, "s3:ListBucket", listing, **{"s3:prefix": f"finetune/checkpoints/{RUN}/"})
    assert not _can(role, "s3:ListBucket", listing, **{"s3:prefix": "finetune/checkpoints/"})


def test_no_run_role_can_erase_history(role):
    key = f"{OBJ}/checkpoints/{RUN}/epoch-3/params"
    for action in (
        "s3:DeleteObjectVersion",
        "s3:PutBucketVersioning",
        "s3:PutLifecycleConfiguration",
    ):
        assert not _can(role, action, key) and not _can(role, action, f"arn:aws:s3:::{BUCKET}")


def test_the_bucket_keeps_old_versions_for_a_while():
    bucket = yaml.safe_load(infra.template_text())["Resources"]["Bucket"]["Properties"]
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = {r["Id"]: r for r in bucket["LifecycleConfiguration"]["Rules"]}
    old = rules["expire-old-versions"]
    assert old["Status"] == "Enabled" and old["NoncurrentVersionExpiration"]["NoncurrentDays"] >= 7


def test_a_run_writes_only_its_own_jobs_log_streams(role):
    """Issue 23 #10: finetune reads epoch metrics from a job's log lines, so another job's
    role must not be able to create or write streams under this job's name."""
    logs = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs"
    for job in (job_name(RUN), job_name(RUN, 2)):
        for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
            assert _can(role, action, f"{logs}:log-stream:{job}/algo-1-1763790000")
    assert _can(role, "logs:CreateLogGroup", logs)
    assert _can(role, "logs:DescribeLogStreams", logs)
    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        assert not _can(role, action, f"{logs}:log-stream:{job_name(OTHER)}/algo-9-1763790000")
        assert not _can(role, action, f"{logs}:log-stream:{job_name(OTHER, 2)}/algo-1-1")
        assert not _can(role, action, f"{logs}:log-stream:unrelated")
    assert not _can(
        role,
        "logs:PutLogEvents",
        f"{logs.replace('Training', 'Processing')}:log-stream:{job_name(RUN)}/algo-1-1",
    )
