"""The content-addressed dataset upload, over HTTP: skip what is there, multipart with SHA256
checksums, our retries on SlowDown (counted at the gateway), clear failures."""

from __future__ import annotations

import hashlib
import os
import shutil

import boto3
import pytest

from finetune.aws import s3upload as up
from finetune.aws.errors import AccessError, ThrottledError
from finetune.backends.sagemaker.validate import check_inputs
from finetune.errors import DataError

from .conftest import BUCKET, REGION


@pytest.fixture
def s3(cloud):
    return boto3.client("s3", region_name=REGION)


def _big(tmp_path, size: int) -> up.DatasetUpload:
    path = tmp_path / "big.rec"
    path.write_bytes(os.urandom(size))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    f = up.UploadFile(
        local=path, key="finetune/datasets/big-1/train/big.rec", sha256=sha, size=size
    )
    return up.DatasetUpload(bucket=BUCKET, prefix="finetune/datasets/big-1/", files=(f,))


def test_prefix_is_content_addressed_and_ends_with_slash(tiny_dataset, tmp_path):
    a = up.plan_upload(tiny_dataset, BUCKET)
    assert a.prefix.startswith("finetune/datasets/shapes-") and a.prefix.endswith("/")
    assert all(uri.endswith("/") for uri in a.channels.values())
    assert a.channels["train"] == f"s3://{BUCKET}/{a.prefix}train/"
    assert up.plan_upload(tiny_dataset, BUCKET).prefix == a.prefix  # deterministic
    copy = tmp_path / "shapes"
    shutil.copytree(tiny_dataset, copy)
    assert up.plan_upload(copy, BUCKET).prefix == a.prefix  # same bytes, same place
    keys = sorted(f.key[len(a.prefix) :] for f in a.files)
    assert keys == [
        "train/manifest.json",
        "train/shapes_train.idx",
        "train/shapes_train.rec",
        "validation/manifest.json",
        "validation/shapes_val.idx",
        "validation/shapes_val.rec",
    ]


def test_upload_then_skip(s3, cloud, tiny_dataset):
    plan = up.plan_upload(tiny_dataset, BUCKET)
    done = []
    first = up.upload_dataset(s3, plan, done.append)
    assert len(first.uploaded) == 6 and sum(done) == plan.total_bytes
    puts = cloud.requests("PutObject")
    assert all(p.headers.get("x-amz-checksum-sha256") for p in puts)
    assert all(p.headers.get("x-amz-meta-sha256") for p in puts)
    cloud.reset()
    again = up.upload_dataset(s3, plan)
    assert again.uploaded == [] and len(again.skipped) == 6
    assert set(cloud.actions()) == {"HeadObject"}


def test_multipart_with_checksums(s3, cloud, tmp_path):
    plan = _big(tmp_path, 11 * 2**20)
    done = []
    up.upload_dataset(s3, plan, done.append, part_size=5 * 2**20)
    assert done == [5 * 2**20, 5 * 2**20, 2**20]
    (create,) = cloud.requests("CreateMultipartUpload")
    assert create.headers["x-amz-checksum-algorithm"] == "SHA256"
    parts = cloud.requests("UploadPart")
    assert [p.query["partNumber"] for p in parts] == ["1", "2", "3"]
    assert all(p.headers["x-amz-checksum-sha256"] for p in parts)
    assert b"<ChecksumSHA256>" in cloud.requests("CompleteMultipartUpload")[0].body
    head = s3.head_object(Bucket=BUCKET, Key=plan.files[0].key)
    assert (
        head["Metadata"]["sha256"] == plan.files[0].sha256 and head["ContentLength"] == 11 * 2**20
    )


def test_slow_down_is_retried_with_backoff(s3, cloud, tmp_path):
    plan = _big(tmp_path, 11 * 2**20)
    cloud.fail("UploadPart", "SlowDown", "Please reduce your request rate.", status=503, times=2)
    up.upload_dataset(s3, plan, part_size=5 * 2**20)
    assert len(cloud.requests("UploadPart")) == 3 + 2
    assert len(cloud.delays) == 2 and all(d >= 0 for d in cloud.delays)


def test_endless_slow_down_gives_up_and_aborts(s3, cloud, tmp_path):
    plan = _big(tmp_path, 6 * 2**20)
    cloud.fail("UploadPart", "SlowDown", status=503, times=-1)
    with pytest.raises(ThrottledError, match=r"SlowDown.*all 5 attempts") as err:
        up.upload_dataset(s3, plan, part_size=5 * 2**20)
    assert "To fix:" in str(err.value)
    assert len(cloud.requests("UploadPart")) == 5
    assert len(cloud.requests("AbortMultipartUpload")) == 1


def test_access_denied_names_the_object_and_the_policy(s3, cloud, tiny_dataset):
    cloud.fail("PutObject", "AccessDenied", "Access Denied", status=403)
    with pytest.raises(AccessError) as err:
        up.upload_dataset(s3, up.plan_upload(tiny_dataset, BUCKET))
    text = str(err.value)
    assert f"s3://{BUCKET}/finetune/datasets/shapes-" in text and "caller policy" in text


def test_a_file_changed_since_prepare_is_refused(s3, cloud, tiny_dataset, tmp_path):
    copy = tmp_path / "shapes"
    shutil.copytree(tiny_dataset, copy)
    plan = up.plan_upload(copy, BUCKET)
    rec = copy / "shapes_train.rec"
    rec.write_bytes(rec.read_bytes()[::-1])  # same size, other bytes
    with pytest.raises(DataError, match="changed since it was prepared"):
        up.upload_dataset(s3, plan)


def test_a_prefix_never_matches_its_siblings(s3, cloud):
    s3.put_object(Bucket=BUCKET, Key="finetune/datasets/shapes-10/train/x.rec", Body=b"x")
    uri = f"s3://{BUCKET}/finetune/datasets/shapes-1/train/"
    (problem,) = check_inputs(s3, {"train": uri}, {"train": ["x.rec"]})
    assert "is empty" in problem.what
    assert up.list_prefix(s3, BUCKET, "finetune/datasets/shapes-1") == {}
    found = up.list_prefix(s3, BUCKET, "finetune/datasets/shapes-10")
    assert found == {"finetune/datasets/shapes-10/train/x.rec": 1}


def test_a_test_split_is_uploaded_with_the_validation_channel(s3, cloud, image_folder, tmp_path):
    from finetune.data.datasets import prepare_folder

    ds = tmp_path / "withtest"
    params = dict(train_per_class=8, test_per_class=3, resize=40, quality=90)
    prepare_folder(image_folder, ds, "shapes", params, workers=1)
    plan = up.plan_upload(ds, BUCKET)
    result = up.upload_dataset(s3, plan)
    assert len(result.uploaded) == 8
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    for name in ("shapes_test.rec", "shapes_test.idx"):
        assert f"{plan.prefix}validation/{name}" in keys
        assert f"{plan.prefix}train/{name}" not in keys
