"""`launch --backend ec2 --dataset s3://...` outside finetune's dataset prefix: refused before
anything is created, unless --read-prefix names it; then the run's role reads exactly that."""

from __future__ import annotations

import json
import os
import re

import boto3
from typer.testing import CliRunner

from finetune.cli import app

from .conftest import REGION
from .control import instances_of


def _upload_to(dataset, prefix: str) -> str:
    """The prepared dataset's files under s3://BUCKET/PREFIX{train,validation}/."""
    from finetune.aws.s3upload import plan_upload

    bucket = os.environ["FINETUNE_BUCKET"]
    s3 = boto3.client("s3", region_name=REGION)
    for f in plan_upload(str(dataset), bucket).files:
        channel_and_name = f.key.split("/", 3)[3]  # finetune/datasets/NAME-HASH/<channel/name>
        s3.upload_file(str(f.local), bucket, prefix + channel_and_name)
    return f"s3://{bucket}/{prefix}"


def _launch(uri: str, *extra: str):
    args = ["launch", "smoke-resnet18", "--backend", "ec2", "--instance", "g5.xlarge"]
    return CliRunner().invoke(app, [*args, "--dataset", uri, "--detach", *extra])


def test_a_dataset_at_the_bucket_root_is_refused_before_anything_is_created(ec2_aws, tiny_dataset):
    uri = _upload_to(tiny_dataset, "")
    res = _launch(uri)
    assert res.exit_code == 2 and "--read-prefix" in res.output and "To fix:" in res.output
    assert ec2_aws.sent("RunInstances") == [] and ec2_aws.sent("CreateRole") == []
    res = _launch(uri, "--read-prefix", uri)  # naming the root does not help
    assert res.exit_code == 2 and "other runs' data" in res.output
    assert ec2_aws.sent("RunInstances") == []


def test_a_named_prefix_is_all_the_role_reads(ec2_aws, tiny_dataset):
    bucket = os.environ["FINETUNE_BUCKET"]
    uri = _upload_to(tiny_dataset, "shared/shapes/")
    res = _launch(uri, "--read-prefix", f"s3://{bucket}/shared/")
    assert res.exit_code == 0, res.output
    (put,) = ec2_aws.sent("PutRolePolicy")
    doc = json.loads(put["PolicyDocument"])
    reads = {s["Sid"]: s for s in doc["Statement"]}["ReadDataset"]["Resource"]
    assert reads == [f"arn:aws:s3:::{bucket}/shared/*"]
    run_id = re.search(r"Run (ft-[\w-]+) started", res.output)[1]
    assert CliRunner().invoke(app, ["runs", "stop", run_id]).exit_code == 0
    assert instances_of(run_id, ["pending", "running"]) == []


def test_the_shared_dataset_is_readable_through_role_and_boundary(ec2_aws, tiny_dataset):
    """Issue 22: the role sent for `--read-prefix s3://BUCKET/shared/...`, replayed with the
    stack's boundary: the dataset reads (the boundary allowed finetune/* only); other runs'
    data does not; a prefix the boundary cannot read is refused before anything is made."""
    from finetune.aws import infra
    from tests.security.iam_eval import Request, allowed

    bucket = os.environ["FINETUNE_BUCKET"]
    uri = _upload_to(tiny_dataset, "shared/shapes/")
    res = _launch(uri, "--read-prefix", f"s3://{bucket}/shared/shapes/")
    assert res.exit_code == 0, res.output
    (put,) = ec2_aws.sent("PutRolePolicy")
    role = json.loads(put["PolicyDocument"])
    (create,) = ec2_aws.sent("CreateRole")
    account = create["PermissionsBoundary"].split(":")[4]
    names = infra.Names(account, REGION, bucket)
    boundary = infra.render(infra.policy_document("ec2-boundary"), names)
    obj = f"arn:aws:s3:::{bucket}"
    on = {
        "aws:EC2InstanceSourceVPC": "vpc-1",
        "ec2:SourceInstanceARN": "arn:aws:ec2:eu-west-1:123456789012:instance/i-0abc",
    }  # the instance's own requests
    assert allowed(role, Request("s3:GetObject", f"{obj}/shared/shapes/train/x.rec", on), boundary)
    other = f"{obj}/finetune/runs/ft-other/model/model.pt"
    assert not allowed(role, Request("s3:GetObject", other, on), boundary)
    run_id = re.search(r"Run (ft-[\w-]+) started", res.output)[1]
    assert CliRunner().invoke(app, ["runs", "stop", run_id]).exit_code == 0
    res = _launch(_upload_to(tiny_dataset, "mine/shapes/"), "--read-prefix", f"s3://{bucket}/mine/")
    assert res.exit_code == 2 and "outside what a run may read" in res.output, res.output
    assert len(ec2_aws.sent("CreateRole")) == 1
