"""What a run may read in S3: its dataset's own prefix, and the extra prefixes the user named.

A run's role is scoped to these prefixes (a dataset given as ``s3://BUCKET/`` would give it
every run's checkpoints, models and logs). A dataset lies under the tool's dataset prefix
(``finetune/datasets/NAME/``, where finetune uploads) or inside a ``--read-prefix``, which lies
in the run's bucket under ``shared/`` or ``finetune/`` (all the permissions boundaries,
infra/policies/*-run-boundary.json, let a run read), covers no prefix where runs keep their
own data (code included) and is not the dataset prefix itself (every dataset). A prefix ends
up in an IAM ARN, so a key holding ``*``, ``?`` or ``$`` (wildcards, ``${...}``) is refused.
"""

from __future__ import annotations

from finetune.aws.s3upload import DATASETS_ROOT, as_prefix, parse_s3_uri
from finetune.errors import UsageError

RUN_DATA = ("finetune/runs/", "finetune/output/", "finetune/checkpoints/", "finetune/code/")
SHARED_ROOT = "shared/"  # datasets kept outside finetune/: the boundaries let runs read it
READABLE_ROOTS = (DATASETS_ROOT, SHARED_ROOT)  # what the boundaries let a run read as data
POLICY_SPECIALS = "*?$"  # IAM wildcards and policy variables: never in a prefix we grant


def refuse_policy_specials(key: str, what: str) -> None:
    """Refuse a key or prefix that would mean more than itself in an IAM policy ARN."""
    bad = sorted({c for c in key if c in POLICY_SPECIALS})
    if bad:
        raise UsageError(
            f"{what} contains {' '.join(repr(c) for c in bad)}: in the run's IAM policy that "
            "would be a wildcard (or a policy variable) matching other runs' data",
            "name the prefix literally, without *, ? or $ (copy the data to such a prefix "
            "first if its name has them).",
        )


def read_prefixes(dataset_uri: str, bucket: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The key prefixes (in ``bucket``) a run reads: the dataset's when it lies under the
    dataset prefix, then each ``extra`` one. Raises a UsageError for a dataset outside them."""
    named = [_extra_prefix(uri, bucket) for uri in extra]
    where, key = parse_s3_uri(dataset_uri)
    key = as_prefix(key)
    refuse_policy_specials(key, f"the dataset {dataset_uri}")
    if where != bucket:
        raise UsageError(
            f"the dataset {dataset_uri} is not in the run's bucket {bucket}",
            f"copy it into s3://{bucket}/{DATASETS_ROOT}NAME/ (aws s3 sync), or launch with "
            "the local dataset folder (finetune uploads it).",
        )
    inside_root = key.startswith(DATASETS_ROOT) and key != DATASETS_ROOT
    if not inside_root and not any(key.startswith(p) for p in named):
        raise UsageError(
            f"the dataset {dataset_uri} is outside finetune's dataset prefix "
            f"s3://{bucket}/{DATASETS_ROOT}NAME/; the run's role would read all of it",
            f"point --dataset at one dataset's prefix, or name the prefix the run may read "
            f"with --read-prefix s3://{bucket}/{SHARED_ROOT}NAME/ (never the bucket's root).",
        )
    return list(dict.fromkeys(([key] if inside_root else []) + named))


def _extra_prefix(uri: str, bucket: str) -> str:
    """One --read-prefix, checked: in ``bucket``, not the root, not covering run data."""
    where, key = parse_s3_uri(uri)
    key = as_prefix(key)
    refuse_policy_specials(key, f"--read-prefix {uri}")
    if where != bucket:
        raise UsageError(
            f"--read-prefix {uri} is not in the run's bucket {bucket}",
            f"copy the data into s3://{bucket}/ and name that prefix.",
        )
    clash = [r for r in RUN_DATA if r.startswith(key) or key.startswith(r)]
    if not key or clash or key == DATASETS_ROOT:
        what = clash[0] if clash else "every dataset" if key else "the whole bucket"
        raise UsageError(
            f"--read-prefix {uri} would let the run read other runs' data ({what})",
            f"name a narrower prefix, e.g. s3://{bucket}/{SHARED_ROOT}NAME/.",
        )
    if not key.startswith(READABLE_ROOTS):
        raise UsageError(
            f"--read-prefix {uri} is outside what a run may read: the permissions boundaries "
            f"let runs read s3://{bucket}/{SHARED_ROOT}... and "
            f"s3://{bucket}/{DATASETS_ROOT}NAME/... only",
            f"copy the data under s3://{bucket}/{SHARED_ROOT}NAME/ (aws s3 sync) and name "
            "that prefix.",
        )
    return key
