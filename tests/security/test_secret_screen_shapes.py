"""The secret screen's second pass (issue 23 #14): credential shapes it used to miss, secret
names inside documents and override texts, and stray files that must never ship with a run.

Every secret here is synthetic and assembled from parts at run time, so that no secret scanner
(ours included, and bandit/checkov/gitleaks on this repository) sees a whole one in the file.
"""

from __future__ import annotations

import json
import logging
import tarfile
import zipfile
from io import BytesIO

import pytest

from finetune.backends import secretscan, shipping

_B64 = "Ab3De5Gh7Jk9Mn2Pq4St6Vw8Yz0Bc1Ef3Hi5Kl7No9Qr2Tu4Wx6Za8"  # made-up noise


def _noise(n: int) -> str:
    return (_B64 * 4)[:n]


FOUND = [
    (
        "a token alone in a URL",
        "https://" + _noise(24) + "@git.example.com/org/repo.git",
        "a token in a URL",
    ),
    (
        "a token in a URL inside text",
        "clone https://" + _noise(20) + "@host.example/x now",
        "a token in a URL",
    ),
    ("GitLab personal token", "glpat" + "-" + _noise(20), "a GitLab token"),
    ("GitLab deploy token", "gl" + "dt-" + _noise(24), "a GitLab token"),
    ("Google API key", "AI" + "za" + _noise(35), "a Google API key"),
    ("Google OAuth token", "ya29" + "." + _noise(40), "a Google OAuth token"),
    ("Stripe live secret key", "sk" + "_live_" + _noise(24), "a Stripe key"),
    ("Stripe restricted key", "rk" + "_test_" + _noise(24), "a Stripe key"),
    ("Stripe webhook secret", "wh" + "sec_" + _noise(32), "a Stripe webhook secret"),
    (
        "Azure storage connection string",
        "DefaultEndpointsProtocol=https;AccountName=acct;Account" + "Key=" + _noise(44) + "==",
        "an Azure key or connection string",
    ),
    (
        "Azure service bus key",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccess" + "Key=" + _noise(44),
        "an Azure key or connection string",
    ),
    (
        "Azure SAS URL",
        "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&s" + "ig=" + _noise(43) + "%3D",
        "an Azure SAS signature",
    ),
    (
        "Slack webhook",
        "https://hooks."
        + "slack.com/services/T0"
        + _noise(8)
        + "/B0"
        + _noise(8)
        + "/"
        + _noise(24),
        "a Slack webhook",
    ),
    (
        "api_key= in an override text",
        "use api" + "_key=" + "abc123",
        "a secret (by the name it is assigned to)",
    ),
    (
        "password: in a description",
        "db pass" + "word: " + "hunter22",
        "a secret (by the name it is assigned to)",
    ),
    (
        "HF_TOKEN=... in a text",
        "HF_" + "TOKEN=" + _noise(12),
        "a secret (by the name it is assigned to)",
    ),
    (
        "client_secret in JSON text",
        '{"client_' + 'secret": "' + _noise(10) + '"}',
        "a secret (by the name it is assigned to)",
    ),
    ("a 40-char AWS secret after key=", "key=" + _noise(40), "an AWS secret access key"),
    ("Databricks token", "da" + "pi" + "0123456789abcdef" * 2, "a Databricks token"),
    ("Databricks token -2", "da" + "pi" + "fedcba9876543210" * 2 + "-2", "a Databricks token"),
    ("PyPI token", "py" + "pi-AgEIcHlwaS5vcmc" + _noise(60), "a PyPI token"),
    ("npm token", "np" + "m_" + _noise(36), "an npm token"),
    ("Authorization header", "Authorization: Bear" + "er " + _noise(30), "a bearer token"),
    ("bare bearer token", "bear" + "er " + _noise(20), "a bearer token"),
    ("AWS session token", "IQoJb3Jp" + "Z2luX2VjE" + _noise(200), "an AWS session token"),
    ("old AWS session token", "FwoGZXIv" + "YXdzE" + _noise(150), "an AWS session token"),
]

NOT_FOUND = [
    ("a user name in an ssh URL", "ssh://git@github.com/org/repo.git"),
    ("a short user name in a URL", "https://alice@example.com/x"),
    ("an e-mail address", "written by alice.smith@example.com"),
    ("an S3 URI", "s3://finetune-test-bucket/finetune/datasets/shapes-ec0c329c5a10/"),
    ("a tokenizer setting", "tokenizer=bert-base"),
    ("a token count", "max_tokens=512"),
    ("a placeholder", "api_key=${API_KEY}"),
    ("an empty assignment", "password="),
    ("a null assignment", "token: none"),
    ("Stripe's prefix alone", "sk_live"),
    ("the word bearer in prose", "the bearer of this plan"),
    ("a package named pypi-", "pypi-simple"),
    ("a dapi word", "dapi-config"),
    (
        "a weights digest",
        "weights_sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ),
]


@pytest.mark.parametrize("value, kind", [c[1:] for c in FOUND], ids=[c[0] for c in FOUND])
def test_shapes_are_found(value, kind):
    assert secretscan.value_kind(value) == kind


@pytest.mark.parametrize("value", [c[1] for c in NOT_FOUND], ids=[c[0] for c in NOT_FOUND])
def test_look_alikes_are_not_secrets(value):
    assert secretscan.value_kind(value) is None


def test_a_secret_named_key_inside_a_document_is_found_and_its_value_never_shown():
    value = "abc"  # too short for any shape: only the name says it is a secret
    doc = {"recipe": {"notes": {"api_key": value, "model": "resnet18"}}, "runtime": {"TOKEN": ""}}
    found = secretscan.scan_document("plan.json", doc)
    assert found == [
        secretscan.Finding("plan.json at recipe.notes.api_key", "a secret (by its name)")
    ]
    with pytest.raises(secretscan.SecretFound) as err:
        secretscan.refuse(found, "the run's plan.json in S3")
    assert "recipe.notes.api_key" in str(err.value) and f"'{value}'" not in str(err.value)


def test_an_override_carrying_a_secret_assignment_is_refused_in_the_plan(tiny_dataset):
    from finetune.plan import Resources, build_plan

    resources = Resources(backend="ec2", instance_type="g5.xlarge", device="gpu")
    override = "description=pull with api" + "_key=" + _noise(12)
    plan = build_plan("smoke-resnet18", tiny_dataset, resources, [override])
    found = secretscan.scan_document("plan.json", json.loads(plan.to_json()))
    assert {f.where for f in found} == {
        "plan.json at recipe.description",
        "plan.json at overrides.0",
    }


@pytest.mark.parametrize(
    "recipe", ["smoke-resnet18", "smoke-resnet18-torch", "caltech256-resnet50"]
)
def test_honest_plans_pass_with_the_wider_screen(tiny_dataset, recipe):
    from finetune.plan import Resources, build_plan

    resources = Resources(backend="ec2", instance_type="g5.xlarge", device="gpu")
    plan = build_plan(recipe, tiny_dataset, resources, ["image_size=32"])
    assert secretscan.scan_document("plan.json", json.loads(plan.to_json())) == []
    assert secretscan.scan_map("hyperparameter", plan.hyperparameters.to_strings()) == []


STRAY = [".env", ".netrc", "_netrc", ".aws/credentials", ".git/config", "data/.secrets.json",
         "credentials", "keys/id_rsa", "deploy.pem", "signing.key", "store.p12"]  # fmt: skip


@pytest.fixture
def planted(monkeypatch, tmp_path):
    """A copy of the package folder with stray files in it, imported in its place."""
    import shutil
    from importlib import resources

    copy = tmp_path / "pkg" / "finetune"
    shutil.copytree(
        str(resources.files("finetune")), copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in STRAY:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text("SECRET=" + _noise(20) + "\n")
    monkeypatch.setattr(shipping.resources, "files", lambda package: copy)
    return copy


def test_stray_files_never_ship_in_the_tarball_or_the_wheel(planted, caplog):
    with caplog.at_level(logging.WARNING, logger="finetune.backends.shipping"):
        tar = shipping.source_tarball({"requirements.txt": b"x\n"})
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        shipped = {m.name for m in t.getmembers()}
    _, wheel = shipping.wheel()
    with zipfile.ZipFile(BytesIO(wheel)) as z:
        in_wheel = set(z.namelist())
    for name in STRAY:
        assert f"finetune/{name}" not in shipped and f"finetune/{name}" not in in_wheel
        assert any(name in r.getMessage() for r in caplog.records), name
    assert (
        "finetune/backends/secretscan.py" in shipped
        and "finetune/backends/secretscan.py" in in_wheel
    )
    assert "requirements.txt" in shipped


def test_the_real_package_ships_whole():
    """Nothing of ours looks stray: the filter leaves out nothing from a clean package."""
    from importlib import resources
    from pathlib import Path

    root = Path(str(resources.files("finetune")))
    kept = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    files = {p.relative_to(root).as_posix() for p in kept if p.suffix not in (".pyc", ".pyo")}
    assert {n.removeprefix("finetune/") for n, _ in shipping.package_files()} == files
