"""Region and bucket names (issue 25 item 11): `config set`, FINETUNE_REGION/FINETUNE_BUCKET,
the config file and --region/--bucket flags all go through one check -- a region the catalog
or botocore knows, a bucket name S3's naming rules allow -- with a did-you-mean, and a
5,000-character paste is refused in a short message, never stored or shown as valid."""

from __future__ import annotations

import tomllib

import pytest
from typer.testing import CliRunner

from finetune import settings
from finetune.cli import app
from finetune.settings import configfile as config

LONG = "a" * 5000


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _stored() -> dict:
    return tomllib.loads(config.path().read_text()) if config.path().exists() else {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("xx-nowhere-9", "'xx-nowhere-9' is not a known AWS region."),
        ("EU-West-1", 'is not a known AWS region. Did you mean "eu-west-1"?'),
        ("eu-wset-1", 'Did you mean "eu-west-1"?'),
        ("eu-west-1 ", 'Did you mean "eu-west-1"?'),
        (LONG, "... (5,000 characters) is not a region name"),
    ],
)
def test_config_set_refuses_unknown_regions(value, message):
    res = cli("config", "set", "region", value)
    assert res.exit_code == 4 and message in res.output and "To fix:" in res.output
    assert len(res.output) < 400  # the paste is not echoed back
    assert _stored() == {}  # nothing written


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (
            "Bad_Bucket..Name",
            'only lowercase letters, digits, dots and hyphens. Did you mean "bad-bucket.name"?',
        ),
        ("bad-bucket..name", "two dots in a row"),
        ("ab", "has 2 characters (S3 allows 3 to 63)"),
        ("b" * 64, "has 64 characters"),
        (LONG, "(5,000 characters) is not a valid S3 bucket name: it has 5,000 characters"),
        ("-bucket", "must start and end with a lowercase letter or a digit"),
        ("bucket.", "must start and end with a lowercase letter or a digit"),
        ("192.168.5.4", "may not look like an IP address"),
        ("xn--bucket", "may not start with 'xn--'"),
        ("my-bucket-s3alias", "may not end with '-s3alias'"),
        ("my-bucket--ol-s3", "may not end with '--ol-s3'"),
        ("s3://my-bucket/data", 'without s3:// or a path). Did you mean "my-bucket"?'),
    ],
)
def test_config_set_refuses_bucket_names_s3_would_refuse(value, rule):
    res = cli("config", "set", "bucket", "--", value)  # "--": "-bucket" is no option
    assert res.exit_code == 4, res.output
    out = " ".join(res.output.split())
    assert "is not a valid S3 bucket name" in out and rule in out and "To fix:" in out
    assert len(res.output) < 400 and _stored() == {}


def test_valid_names_are_stored_including_regions_only_botocore_knows():
    for key, value in [("region", "ap-southeast-2"), ("bucket", "my.bucket-1"), ("bucket", "abc")]:
        res = cli("config", "set", key, value)
        assert res.exit_code == 0, res.output
        assert _stored()[key] == value


def test_other_settings_have_a_length_cap():
    res = cli("config", "set", "role_arn", LONG)
    assert res.exit_code == 4 and "too long for role_arn (at most 2,048 characters)" in res.output
    res = cli("config", "set", "data_dir", LONG)
    assert res.exit_code == 4 and "too long for data_dir" in res.output
    assert _stored() == {}


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("FINETUNE_REGION", "xx-nowhere-9", "FINETUNE_REGION 'xx-nowhere-9' is not a known"),
        ("FINETUNE_BUCKET", "Bad_Bucket..Name", "FINETUNE_BUCKET 'Bad_Bucket..Name' is not a"),
    ],
)
def test_a_bad_environment_value_is_refused_by_a_dry_run(
    tiny_dataset, monkeypatch, var, value, message
):
    monkeypatch.setenv("FINETUNE_REGION", "eu-west-1")
    monkeypatch.setenv("FINETUNE_BUCKET", "finetune-test-bucket")
    monkeypatch.setenv(var, value)
    settings.get.cache_clear()
    args = ["launch", "smoke-resnet18", "--dataset", str(tiny_dataset), "--dry-run"]
    res = cli(*args, "--backend", "sagemaker", "--instance", "g5.xlarge")
    assert res.exit_code == 4, res.output
    assert message in res.output and f"set {var} to a valid" in res.output
    assert "SageMaker job" not in res.output  # the plan is not shown as if it would go


def test_a_bad_value_in_the_config_file_is_named_and_can_be_fixed():
    config.path().write_text('region = "xx-nowhere-9"\n')
    res = cli("config", "show")
    assert res.exit_code == 4 and "the config file's region 'xx-nowhere-9'" in res.output
    assert "`finetune config set region eu-west-1`" in res.output
    assert cli("config", "set", "bucket", "my-bucket").exit_code == 0  # not blocked by it
    assert cli("config", "set", "region", "eu-west-1").exit_code == 0  # the fix it offers
    assert cli("config", "show").exit_code == 0
    assert _stored() == {"region": "eu-west-1", "bucket": "my-bucket"}


@pytest.mark.parametrize(
    "args",
    [
        ["launch", "smoke-resnet18", "--backend", "sagemaker", "--instance", "g5.xlarge",
         "--region", "xx-nowhere-9", "--dry-run"],
        ["sweep", "smoke-resnet18", "--backend", "sagemaker", "--instance", "g5.xlarge",
         "--region", "xx-nowhere-9", "--dry-run"],
        ["prices", "--region", "xx-nowhere-9"],
        ["infra", "print", "--policy", "caller", "--region", "xx-nowhere-9"],
    ],
)  # fmt: skip
def test_a_region_flag_takes_the_same_check(tiny_dataset, args):
    res = cli(*args[:2], "--dataset", str(tiny_dataset), *args[2:]) if args[0] in (
        "launch", "sweep") else cli(*args)  # fmt: skip
    assert res.exit_code == 4, res.output
    assert "--region 'xx-nowhere-9' is not a known AWS region" in res.output
    assert "To fix:" in res.output


def test_a_bucket_flag_takes_the_same_check():
    res = cli("infra", "print", "--policy", "caller", "--bucket", "Bad_Bucket..Name")
    assert res.exit_code == 4 and "--bucket 'Bad_Bucket..Name' is not a valid" in res.output


def test_an_empty_variable_still_means_unset_but_config_set_refuses_it(monkeypatch):
    monkeypatch.setenv("FINETUNE_REGION", "")
    res = CliRunner().invoke(app, ["config", "show", "--json"])
    assert res.exit_code == 0, res.output
    res = cli("config", "set", "region", "")
    assert res.exit_code == 4 and "'' is not a region name" in res.output and _stored() == {}


def test_the_region_list_read_as_data_is_the_catalogs():
    """settings.names reads the bundled snapshot's regions without the catalog's code (which
    needs the settings): the same regions the catalog module reads."""
    from finetune.catalog import snapshot
    from finetune.settings import names

    assert names.CATALOG_FILE == snapshot.FILE
    assert names._catalog_regions() == {region for _, region in snapshot.rows()}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/dev/null", "/dev/null exists and is not a folder"),
        ("data", "a relative path means another folder from every working directory"),
        ("./finetune-data", "a relative path"),
    ],
)
@pytest.mark.parametrize("key", ["data_dir", "cache_dir"])
def test_folder_settings_refuse_devices_and_relative_paths(key, value, message, tmp_path):
    """Issue 34, item 6: `config set data_dir /dev/null` (or a relative path) was stored."""
    res = cli("config", "set", key, value)
    assert res.exit_code == 4, res.output
    out = " ".join(res.output.split())
    assert message in out and "To fix:" in out and "Traceback" not in out, out
    assert _stored() == {}
    ok = cli("config", "set", key, str(tmp_path / "mine"))
    assert ok.exit_code == 0, ok.output
    assert _stored()[key] == str(tmp_path / "mine")
    home = cli("config", "set", key, "~/finetune-data")  # ~ is absolute once expanded
    assert home.exit_code == 0, home.output
