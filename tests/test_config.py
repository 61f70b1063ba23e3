"""The config file: `finetune config set/show/unset`, read below the environment."""

from __future__ import annotations

import json
import tomllib

from typer.testing import CliRunner

from finetune import settings
from finetune.cli import app
from finetune.settings import configfile as config


def invoke(*args, **env):
    return CliRunner().invoke(app, ["config", *args], env=env or None)


def _sources(**env) -> dict[str, tuple[str, str]]:
    res = invoke("show", "--json", **env)
    assert res.exit_code == 0, res.output
    return {e["key"]: (e["value"], e["source"]) for e in json.loads(res.stdout)["settings"]}


def test_set_show_and_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("FINETUNE_REGION", raising=False)
    assert _sources()["region"] == (None, "default")
    res = invoke("set", "region", "eu-west-1")
    assert res.exit_code == 0 and str(config.path()) in res.output
    assert invoke("set", "Role-Arn", "arn:aws:iam::1:role/x").exit_code == 0  # any spelling
    assert tomllib.loads(config.path().read_text()) == {
        "region": "eu-west-1",
        "role_arn": "arn:aws:iam::1:role/x",
    }
    settings.get.cache_clear()
    assert settings.get().region == "eu-west-1"  # what every command reads

    shown = _sources()
    assert shown["region"] == ("eu-west-1", "config file")
    assert shown["data_dir"][1] == "environment (FINETUNE_DATA_DIR)"  # set by conftest
    over = _sources(FINETUNE_REGION="us-east-1")
    assert over["region"] == ("us-east-1", "environment (FINETUNE_REGION)")

    monkeypatch.setenv("COLUMNS", "80")
    table = invoke("show")
    assert table.exit_code == 0 and all(len(line) <= 80 for line in table.stdout.splitlines())
    assert "config file" in table.stdout and "eu-west-1" in table.stdout

    assert invoke("unset", "region").exit_code == 0
    assert _sources()["region"] == (None, "default")
    assert not [p for p in config.path().parent.iterdir() if p.name.startswith(".")]


def test_bad_keys_values_and_files_get_a_message():
    res = invoke("set", "regoin", "eu-west-1")
    assert res.exit_code == 4 and 'Did you mean "region"?' in res.output and "To fix:" in res.output
    assert not config.path().exists()  # nothing written
    config.path().write_text('region = "eu-west-1"\n[aws]\nprofile = "x"\n')
    res = invoke("show")
    assert res.exit_code == 4 and "tables or lists (aws)" in res.output
    config.path().write_text("region = eu-west-1\n")  # not TOML: the string is unquoted
    res = invoke("show")
    assert res.exit_code == 4 and "cannot be read" in res.output and "To fix:" in res.output
