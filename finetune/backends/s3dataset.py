"""A prepared dataset already in S3 (``--dataset s3://BUCKET/finetune/datasets/NAME-HASH/``):
its manifest read from the train channel, its files checked to be there with their sizes."""

from __future__ import annotations

import hashlib

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.aws.s3upload import as_prefix, list_prefix, parse_s3_uri
from finetune.aws.session import connect
from finetune.data.channels import CHANNELS, channel_files
from finetune.data.manifest import MANIFEST, parse
from finetune.errors import DataError
from finetune.plan import DatasetSummary


def summarize(uri: str, region: str | None = None):
    """The DatasetSummary of the dataset under ``uri`` (path = the prefix, ending in '/')."""
    root = as_prefix(uri)
    bucket, prefix = parse_s3_uri(root)
    s3 = connect(region).client("s3")
    raw = _get(s3, bucket, f"{prefix}train/{MANIFEST}")
    m = parse(raw, f"{root}train/{MANIFEST}")  # newer schemas refused, unknown fields named
    with aws_errors("ListObjectsV2", resource=root):
        present = list_prefix(s3, bucket, prefix)
    problems = []
    test_count = m.splits["test"].count if "test" in m.splits else 0
    for channel, split in CHANNELS.items():
        for name in channel_files(m.name, split, test_count > 0):
            size = present.get(f"{prefix}{channel}/{name}")
            entry = m.files.get(name)
            if size is None or (entry is not None and size != entry.bytes):
                problems.append(f"{channel}/{name}")
    if problems:
        raise DataError(
            f"the dataset at {root} is incomplete: {', '.join(problems)} missing or wrong size",
            "launch once with the local folder as --dataset: finetune uploads what is missing.",
        )
    return DatasetSummary.from_manifest(m, root, hashlib.sha256(raw).hexdigest())


def _get(s3, bucket: str, key: str) -> bytes:
    with aws_errors("GetObject", resource=f"s3://{bucket}/{key}"):
        try:
            return retries.call(s3.get_object, Bucket=bucket, Key=key)["Body"].read()
        except Exception as exc:
            if retries.error_code(exc) not in ("NoSuchKey", "404"):
                raise
    raise DataError(
        f"s3://{bucket}/{key} does not exist: no dataset was uploaded there",
        "launch once with the local folder as --dataset (finetune uploads it and prints the "
        "s3:// prefix), or check the URI.",
    )
