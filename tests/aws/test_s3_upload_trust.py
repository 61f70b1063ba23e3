"""Issue 23 #9: an object already in the content-addressed dataset prefix is skipped only when
S3's own checksum (computed and verified by S3 as it was written) is the local file's -- not
when its x-amz-meta-sha256 and size say so, which whoever wrote it chose."""

from __future__ import annotations

import hashlib
import os

import boto3
import pytest

from finetune.aws import s3upload as up

from .conftest import BUCKET, REGION


@pytest.fixture
def s3(cloud):
    return boto3.client("s3", region_name=REGION)


def _plant(s3, f: up.UploadFile, body: bytes, checksum: bool) -> None:
    """What another caller with write access to the prefix could put there: the right size
    and the right metadata, other bytes; with or without a checksum of its own bytes."""
    extra = {"ChecksumAlgorithm": "SHA256"} if checksum else {}
    s3.put_object(Bucket=BUCKET, Key=f.key, Body=body, Metadata={up.SHA_META: f.sha256}, **extra)


@pytest.mark.parametrize("checksum", [False, True], ids=["no-checksum", "its-own-checksum"])
def test_a_planted_object_with_matching_metadata_is_replaced(s3, cloud, tiny_dataset, checksum):
    plan = up.plan_upload(tiny_dataset, BUCKET)
    rec = next(f for f in plan.files if f.key.endswith("_train.rec"))
    poisoned = bytearray(rec.local.read_bytes())
    poisoned[100:110] = b"\0" * 10  # same size, other bytes
    _plant(s3, rec, bytes(poisoned), checksum)
    head = s3.head_object(Bucket=BUCKET, Key=rec.key)
    assert head["Metadata"][up.SHA_META] == rec.sha256 and head["ContentLength"] == rec.size
    cloud.reset()
    result = up.upload_dataset(s3, plan)
    assert rec.key in result.uploaded and rec.key not in result.skipped
    body = s3.get_object(Bucket=BUCKET, Key=rec.key)["Body"].read()
    assert hashlib.sha256(body).hexdigest() == rec.sha256  # the file's own bytes again
    heads = cloud.requests("HeadObject")
    assert heads and all(h.headers.get("x-amz-checksum-mode") == "ENABLED" for h in heads)


def test_what_finetune_uploaded_is_skipped_by_s3s_checksum(s3, cloud, tiny_dataset):
    plan = up.plan_upload(tiny_dataset, BUCKET)
    up.upload_dataset(s3, plan)
    for f in plan.files:  # the oracle: S3's checksum is base64(sha256) of the file's bytes
        head = s3.head_object(Bucket=BUCKET, Key=f.key, ChecksumMode="ENABLED")
        want = up._b64(hashlib.sha256(f.local.read_bytes()).digest())
        assert head["ChecksumSHA256"].partition("-")[0] == want
    cloud.reset()
    again = up.upload_dataset(s3, plan)
    assert again.uploaded == [] and len(again.skipped) == len(plan.files)


def test_a_multipart_object_is_skipped_by_its_composite_checksum(s3, cloud, tmp_path):
    path = tmp_path / "big.rec"
    path.write_bytes(os.urandom(11 * 2**20))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    f = up.UploadFile(local=path, key="finetune/datasets/big-1/train/big.rec", sha256=sha,
                      size=11 * 2**20)  # fmt: skip
    plan = up.DatasetUpload(bucket=BUCKET, prefix="finetune/datasets/big-1/", files=(f,))
    part = 5 * 2**20
    assert up.upload_dataset(s3, plan, part_size=part).uploaded == [f.key]
    assert up.upload_dataset(s3, plan, part_size=part).skipped == [f.key]
    # planted over it: one part's worth of other bytes, metadata and size unchanged
    _plant(s3, f, os.urandom(f.size), checksum=True)
    assert up.upload_dataset(s3, plan, part_size=part).uploaded == [f.key]
