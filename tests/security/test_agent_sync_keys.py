"""The EC2 agent's S3 download refuses keys that would land outside its destination
(issue 16, defect 6): `..` components, a leading `/`, and symbolic links out of the folder.
Before anything is written, so a hostile key cannot even leave half a checkpoint behind."""

from __future__ import annotations

import os

import boto3
import pytest

from finetune.backends.ec2.agent.s3sync import RunStore, UnsafeKey, contained

BUCKET, PREFIX = "finetune-test-bucket", "finetune/runs/ft-1/"


@pytest.fixture
def s3(aws):
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.mark.parametrize(
    "name", ["../escape", "a/../../escape", "/etc/passwd", "a//b", "./a", "a\\..\\b", ""]
)
def test_unsafe_names_are_refused(tmp_path, name):
    with pytest.raises(UnsafeKey, match="refusing S3 key"):
        contained(tmp_path / "dest", name, PREFIX + name)


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(tmp_path, dest / "up")
    with pytest.raises(UnsafeKey, match="resolves outside"):
        contained(dest, "up/x", PREFIX + "up/x")
    assert contained(dest, "epoch-1/params", "k") == (dest / "epoch-1" / "params").resolve()


def test_download_with_a_hostile_key_writes_nothing(s3, tmp_path):
    for key in ("checkpoints/epoch-1/params", "checkpoints/../../../victim", "checkpoints/"):
        s3.put_object(Bucket=BUCKET, Key=PREFIX + key, Body=b"x")
    dest = tmp_path / "ml" / "checkpoints"
    with pytest.raises(UnsafeKey, match=r"victim"):
        RunStore(s3, BUCKET, PREFIX).download_tree("checkpoints/", dest)
    assert not dest.exists() and not (tmp_path / "victim").exists()


def test_download_of_honest_keys_keeps_their_paths(s3, tmp_path):
    for key in ("checkpoints/epoch-1/params", "checkpoints/epoch-1/COMPLETE", "checkpoints/"):
        s3.put_object(Bucket=BUCKET, Key=PREFIX + key, Body=b"x")
    dest = tmp_path / "ml" / "checkpoints"
    assert RunStore(s3, BUCKET, PREFIX).download_tree("checkpoints/", dest) == 2
    assert sorted(p.name for p in (dest / "epoch-1").iterdir()) == ["COMPLETE", "params"]
