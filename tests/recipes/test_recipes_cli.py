"""`finetune recipes list | show | validate` through the real Typer app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.recipes.loading import BUILTIN_DIR

runner = CliRunner()


def test_list(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    result = runner.invoke(app, ["recipes", "list"])
    assert result.exit_code == 0, result.output
    assert "caltech256-resnet152" in result.output and "builtin" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80  # descriptions wrap
    rows = json.loads(runner.invoke(app, ["recipes", "list", "--json"]).stdout)
    assert {r["name"] for r in rows} >= {"caltech256-resnet50", "smoke-resnet18"}


def test_list_marks_an_invalid_project_recipe(monkeypatch, tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "broken.yaml").write_text("name: broken\nmodel: {}\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["recipes", "list"])
    assert result.exit_code == 0
    assert "INVALID" in result.output


def test_show_yaml_and_json_with_overrides():
    result = runner.invoke(app, ["recipes", "show", "caltech256-resnet152", "epochs=2"])
    assert result.exit_code == 0, result.output
    assert "epochs: 2" in result.output and "lr_per_device: 0.00125" in result.output
    data = json.loads(runner.invoke(app, ["recipes", "show", "smoke-resnet18", "--json"]).stdout)
    assert data["model"]["name"] == "resnet18_v1" and data["train"]["kvstore"] is None


def test_show_unknown_recipe_exits_non_zero():
    result = runner.invoke(app, ["recipes", "show", "caltech256-resnet15"])
    assert result.exit_code == 4
    assert 'Did you mean "caltech256-resnet152"' in result.output and "To fix:" in result.output


def test_show_output_is_a_valid_recipe(tmp_path):
    text = runner.invoke(app, ["recipes", "show", "caltech256-resnet50"]).stdout
    (tmp_path / "copy.yaml").write_text(text)
    result = runner.invoke(app, ["recipes", "validate", str(tmp_path / "copy.yaml")])
    assert result.exit_code == 0, result.output


def test_validate_all_bundled():
    result = runner.invoke(app, ["recipes", "validate"])
    assert result.exit_code == 0, result.output
    assert result.output.count("ok ") >= len(list(BUILTIN_DIR.glob("*.yaml")))


def test_validate_reports_every_bad_file(tmp_path):
    good = BUILTIN_DIR / "smoke-resnet18.yaml"
    typo = tmp_path / "typo.yaml"
    typo.write_text(good.read_text().replace("batch_per_device:", "batch_per_deviceu:"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [\n")
    result = runner.invoke(app, ["recipes", "validate", str(good), str(typo), str(broken)])
    assert result.exit_code == 4
    assert f"ok   {good}" in result.output
    assert (
        'train.batch_per_deviceu: unknown key. Did you mean "train.batch_per_device"?'
        in result.output
    )
    assert "not valid YAML" in result.output
    assert "2 of 3 recipe(s) invalid" in result.output


def test_every_recipes_command_has_help():
    for cmd in ("list", "show", "validate"):
        result = runner.invoke(app, ["recipes", cmd, "--help"])
        assert result.exit_code == 0 and len(result.output) > 100


def test_validate_a_folder(tmp_path):
    (tmp_path / "a.yaml").write_text((BUILTIN_DIR / "smoke-resnet18.yaml").read_text())
    (tmp_path / "b.yaml").write_text("name: b\n")
    result = runner.invoke(app, ["recipes", "validate", str(tmp_path)])
    assert result.exit_code == 4
    assert "ok   " in result.output and "FAIL" in result.output
    assert "model: required key is missing" in result.output


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999"])
def test_an_infinite_learning_rate_is_refused_before_anything_runs(value, tiny_dataset):
    res = CliRunner().invoke(
        app, ["launch", "smoke-resnet18", f"lr_per_device={value}", "--dataset", str(tiny_dataset),
              "--dry-run"],
    )  # fmt: skip
    assert res.exit_code != 0
    assert "optimizer.lr_per_device" in res.output and "To fix:" in res.output
    assert "Traceback" not in res.output
