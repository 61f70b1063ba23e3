"""A run reads its dataset's prefix and the prefixes the user named, nothing else (issue 16,
defect 5): `--dataset s3://BUCKET/` no longer hands the run every object of the bucket."""

from __future__ import annotations

import pytest

from finetune.aws.datasetscope import read_prefixes
from finetune.backends.ec2.request import instance_policy
from finetune.errors import UsageError

B = "bucket"
DATASET = f"s3://{B}/finetune/datasets/shapes-ec0c329c5a10/"


def test_a_dataset_under_the_dataset_prefix_is_read_alone():
    assert read_prefixes(DATASET, B) == ["finetune/datasets/shapes-ec0c329c5a10/"]
    assert read_prefixes(DATASET.rstrip("/"), B) == ["finetune/datasets/shapes-ec0c329c5a10/"]


@pytest.mark.parametrize(
    "uri",
    [f"s3://{B}/", f"s3://{B}/finetune/", f"s3://{B}/finetune/datasets/", f"s3://{B}/mine/d1/"],
)
def test_a_dataset_elsewhere_needs_a_named_prefix(uri):
    with pytest.raises(UsageError, match="--read-prefix") as err:
        read_prefixes(uri, B)
    assert "To fix:" in str(err.value)


def test_a_named_prefix_is_read_exactly():
    assert read_prefixes(f"s3://{B}/shared/d1/", B, (f"s3://{B}/shared",)) == ["shared/"]
    both = read_prefixes(DATASET, B, (f"s3://{B}/shared/labels/",))
    assert both == ["finetune/datasets/shapes-ec0c329c5a10/", "shared/labels/"]


@pytest.mark.parametrize(
    "prefix",
    [
        f"s3://{B}/",
        f"s3://{B}/finetune/",
        f"s3://{B}/finetune/runs/",
        f"s3://{B}/finetune/output/x/",
    ],
)
def test_named_prefixes_never_cover_run_data(prefix):
    with pytest.raises(UsageError, match="other runs' data"):
        read_prefixes(DATASET, B, (prefix,))


def test_other_buckets_are_refused():
    with pytest.raises(UsageError, match="not in the run's bucket"):
        read_prefixes("s3://elsewhere/finetune/datasets/d/", B)
    with pytest.raises(UsageError, match="not in the run's bucket"):
        read_prefixes(DATASET, B, ("s3://elsewhere/data/",))


def test_the_instance_role_gets_exactly_those_prefixes():
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/finetune@sha256:" + "a" * 64
    reads = read_prefixes(DATASET, B, (f"s3://{B}/shared/labels/",))
    policy = instance_policy(B, "finetune/runs/R/", reads, image)
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["ReadDataset"]["Resource"] == [
        f"arn:aws:s3:::{B}/finetune/datasets/shapes-ec0c329c5a10/*",
        f"arn:aws:s3:::{B}/shared/labels/*",
    ]
    listed = by_sid["ListOwnPrefixes"]["Condition"]["StringLike"]["s3:prefix"]
    assert listed == [
        "finetune/runs/R/*",
        "finetune/datasets/shapes-ec0c329c5a10/*",
        "shared/labels/*",
    ]


@pytest.mark.parametrize(
    "prefix",
    [f"s3://{B}/*/", f"s3://{B}/finetune/?uns/", f"s3://{B}/shared/${{aws:username}}/"],
)
def test_iam_wildcards_never_reach_a_policy(prefix):
    """Issue 23, 7: `s3://BUCKET/*/` became `arn:aws:s3:::BUCKET/*/*` in the run's role --
    every run's checkpoints and models. Replayed: the old role read another run's model."""
    with pytest.raises(UsageError, match="wildcard") as err:
        read_prefixes(DATASET, B, (prefix,))
    assert "To fix:" in str(err.value)
    with pytest.raises(UsageError, match="wildcard"):
        read_prefixes(f"s3://{B}/finetune/datasets/*/", B)


def test_what_such_a_prefix_would_have_granted():
    """The oracle for the test above: the same key, put into the instance role unchecked,
    is read access to another run's data (the evaluator agrees with the review)."""
    from .iam_eval import Request, allowed

    policy = instance_policy(B, "finetune/runs/R/", ["*/"], "img")
    other = f"arn:aws:s3:::{B}/finetune/runs/OTHER/model/model.pt"
    assert allowed(policy, Request("s3:GetObject", other))


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        (f"s3://{B}/finetune/code/", "finetune/code/"),
        (f"s3://{B}/finetune/code/ft-1/", "finetune/code/"),
        (f"s3://{B}/finetune/datasets/", "every dataset"),
    ],
)
def test_code_and_the_whole_dataset_prefix_are_protected(prefix, why):
    with pytest.raises(UsageError, match="other runs' data") as err:
        read_prefixes(DATASET, B, (prefix,))
    assert why in str(err.value)
    # one dataset under the dataset prefix is still a fine --read-prefix
    one = f"s3://{B}/finetune/datasets/shapes-ec0c329c5a10/"
    assert read_prefixes(one, B, (one,)) == ["finetune/datasets/shapes-ec0c329c5a10/"]
