"""AWS names a user gives: region names and S3 bucket names, checked once for every way in
(`config set`, FINETUNE_REGION / FINETUNE_BUCKET, the config file, --region / --bucket), so
a typo is refused where it is typed -- not shown by a dry run as if valid, nor sent to AWS.

Regions: every region of every partition botocore knows (its bundled partitions.json, read
offline as a file), then the regions of the bundled price catalog (its CSV read as data: this
module sits below the catalog's code, which needs the settings). Buckets: S3's
general-purpose naming rules (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

from finetune.errors import ConfigError, did_you_mean

CATALOG_FILE = "skypilot_aws_vms.csv"  # finetune.catalog.snapshot's file
MAX_REGION = 32  # the longest AWS region name is 16 characters; a cap keeps messages short
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def shown(value: str, limit: int = 40) -> str:
    """``value`` quoted for a message, cut short when long (a 5,000-character paste)."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


@lru_cache(maxsize=1)
def _catalog_regions() -> frozenset[str]:
    """The Region column of the bundled EC2 price snapshot (finetune/catalog/*.csv)."""
    import csv
    from importlib import resources

    text = resources.files("finetune.catalog").joinpath(CATALOG_FILE).read_text(encoding="utf-8")
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return frozenset(r["Region"] for r in rows if _REGION.fullmatch(r.get("Region") or ""))


@lru_cache(maxsize=1)
def _botocore_regions() -> frozenset[str]:
    """Every region of every partition in botocore's bundled partitions.json, read as a
    file (importing botocore.session costs most of a second on every command)."""
    import importlib.util
    import json
    from pathlib import Path

    spec = importlib.util.find_spec("botocore")
    if spec is None or spec.origin is None:  # no AWS extra: the catalog's regions are all
        return frozenset()
    try:
        doc = json.loads((Path(spec.origin).parent / "data" / "partitions.json").read_text())
        found = {r for part in doc["partitions"] for r in part.get("regions", {})}
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    return frozenset(r for r in found if _REGION.fullmatch(r))  # not "aws-global"


def known_regions() -> frozenset[str]:
    """Every region name finetune accepts: the catalog's and botocore's."""
    return _catalog_regions() | _botocore_regions()


def check_region(value: str, where: str) -> str:
    """``value`` if it is a known AWS region name; else a ConfigError naming ``where`` the
    value came from (e.g. "FINETUNE_REGION", "--region") with a did-you-mean."""
    if value in _botocore_regions() or value in _catalog_regions():  # the cheaper first
        return value
    guess = value.strip().lower().replace("_", "-")[:MAX_REGION]
    hint = did_you_mean(guess, known_regions()) if guess else ""
    if guess in known_regions():
        hint = f' Did you mean "{guess}"?'
    why = "is not a region name" if not _REGION.fullmatch(guess) else "is not a known AWS region"
    raise ConfigError(
        f"{where} {shown(value)} {why}.{hint}",
        f"give a region like eu-west-1 or us-east-1 ({where}).",
    )


def bucket_problem(name: str) -> str | None:
    """What breaks S3's bucket naming rules in ``name`` (None: a valid name)."""
    if not 3 <= len(name) <= 63:
        return f"has {len(name):,} characters (S3 allows 3 to 63)"
    if not _BUCKET.fullmatch(name):
        if re.search(r"[^a-z0-9.-]", name):
            return "may hold only lowercase letters, digits, dots and hyphens"
        return "must start and end with a lowercase letter or a digit"
    if ".." in name:
        return "may not hold two dots in a row"
    try:
        ipaddress.IPv4Address(name)
        return "may not look like an IP address"
    except ValueError:
        pass
    prefix = next((p for p in BUCKET_PREFIXES if name.startswith(p)), None)
    if prefix:
        return f"may not start with {prefix!r} (reserved by S3)"
    suffix = next((s for s in BUCKET_SUFFIXES if name.endswith(s)), None)
    if suffix:
        return f"may not end with {suffix!r} (reserved by S3)"
    return None


def _bucket_guess(name: str) -> str:
    """The valid name a user most likely meant: lowercase, '_' and spaces as '-', no '..'."""
    guess = re.sub(r"[_\s]+", "-", name.strip().lower())
    guess = re.sub(r"\.{2,}", ".", re.sub(r"[^a-z0-9.-]", "", guess))
    return guess.strip(".-")[:63].strip(".-")


def check_bucket(value: str, where: str) -> str:
    """``value`` if it is a valid S3 bucket name; else a ConfigError naming ``where`` it came
    from, the rule it breaks, and a corrected name when one is near."""
    why = bucket_problem(value)
    if why is None:
        return value
    if value.startswith("s3://"):
        why += " (give the bucket's name, without s3:// or a path)"
    guess = _bucket_guess(value.removeprefix("s3://").split("/")[0])
    hint = f' Did you mean "{guess}"?' if guess and bucket_problem(guess) is None else ""
    raise ConfigError(
        f"{where} {shown(value)} is not a valid S3 bucket name: it {why}.{hint}",
        f"give the name of your bucket ({where}), e.g. the BucketName output of "
        "`finetune infra deploy`.",
    )


def _region_field(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str):
        return check_region(value, "--" + (info.field_name or "region").replace("_", "-"))
    return value


# An options-model field holding a --region flag (None: the settings' region).
Region = Annotated[str | None, BeforeValidator(_region_field)]


# The longest value `config set` stores, per key (IAM allows 2048-character ARNs; a path is
# at most PATH_MAX): a pasted page is refused, not written into the file.
MAX_SETTING = {"role_arn": 2048, "profile": 128}
MAX_PATH = 4096


def check_setting(key: str, value: str | None, where: str) -> str | None:
    """A setting's value checked by its kind (region, bucket; every one's length); ``where``
    says where it came from (FINETUNE_REGION, the config file, `config set region`)."""
    if value is None:
        return None
    try:
        if key == "region":
            return check_region(value, where)
        if key == "bucket":
            return check_bucket(value, where)
    except ConfigError as exc:
        raise ConfigError(exc.what, _setting_fix(key, where, exc.fix)) from None
    limit = MAX_SETTING.get(key, MAX_PATH)
    if isinstance(value, str) and len(value) > limit:
        raise ConfigError(
            f"{where} {shown(value)} is too long for {key} (at most {limit:,} characters)",
            f"give the {key} itself.",
        )
    return value


def _setting_fix(key: str, where: str, fix: str | None) -> str | None:
    """How to change a bad setting where it lives: its variable, or the config file."""
    example = {"region": "eu-west-1", "bucket": "my-finetune-bucket"}[key]
    if where.upper().startswith("FINETUNE_"):
        return f"set {where} to a valid {key} (e.g. {example}), or unset it."
    if where.startswith("the config file"):
        return f"run `finetune config set {key} {example}` with yours, or `config unset {key}`."
    return fix
