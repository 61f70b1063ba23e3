"""Bad FINETUNE_* values and bad config-file values: one clear message that names the
variable (or the file's key), the value and what is expected -- on every command, never a
pydantic traceback; FINETUNE_DATA_DIR checked once (empty, a regular file, inside a file)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.settings import configfile as config


def _run(*args, **env):
    return CliRunner().invoke(app, list(args), env=env)


def _clear(res, *phrases):
    assert res.exit_code == 4, res.output
    assert isinstance(res.exception, SystemExit), res.exception  # no traceback
    assert "To fix:" in res.output and "Traceback" not in res.output
    for phrase in phrases:
        assert phrase in res.output, res.output


COMMANDS = [
    ["runs", "list"],
    ["cost-report"],
    ["config", "show"],
    ["prepare", "folder", "IMAGES", "--name", "x"],
    ["launch", "smoke-resnet18", "--dataset", "shapes", "--dry-run"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_data_dir_that_is_a_regular_file(tmp_path, args, image_folder):
    file = tmp_path / "not-a-folder"
    file.write_text("x")
    args = [str(image_folder) if a == "IMAGES" else a for a in args]
    res = _run(*args, FINETUNE_DATA_DIR=str(file))
    _clear(res, f"FINETUNE_DATA_DIR='{file}'", "is not a folder", "a folder path")
    assert "manifest" not in res.output and "check the disk" not in res.output
    inside = _run("runs", "list", FINETUNE_DATA_DIR=str(file / "sub"))
    _clear(inside, f"inside {file}, which is not a folder")


def test_empty_data_dir_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _run("runs", "list", FINETUNE_DATA_DIR="")
    _clear(res, "FINETUNE_DATA_DIR=''", "empty", "current folder")
    assert list(tmp_path.iterdir()) == []  # no ledger made in the current folder


@pytest.mark.parametrize(
    "value,why", [("abc", "valid number"), ("9", "less than or equal to 5"), ("-1", "greater")]
)
def test_bad_environment_value_on_every_command(value, why):
    for args in (["runs", "list"], ["config", "show"], ["cost-report"]):
        res = _run(*args, FINETUNE_SAGEMAKER_MARKUP=value)
        _clear(res, f"FINETUNE_SAGEMAKER_MARKUP='{value}'", why, "a number from 0 to 5")


def test_bad_value_in_the_config_file():
    config.path().parent.mkdir(parents=True, exist_ok=True)
    config.path().write_text('sagemaker_markup = "lots"\n')
    res = _run("runs", "list")
    _clear(res, "sagemaker_markup='lots'", str(config.path()), "config unset sagemaker_markup")
    config.path().write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    _clear(_run("config", "show"), "cannot be read")


def test_ledger_variable_naming_a_folder(tmp_path):
    res = _run("runs", "list", FINETUNE_LEDGER=str(tmp_path))
    _clear(res, "FINETUNE_LEDGER", "names a folder, not a file")
