"""Renamed recipe keys (issue 20: ``*_per_gpu`` -> ``*_per_device``): files and overrides under
the old names still work with one deprecation note on stderr; stored plans read silently."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.errors import ConfigError
from finetune.recipes import renamed
from finetune.recipes.loading import BUILTIN_DIR, load_file, load_recipe


@pytest.fixture(autouse=True)
def fresh_notes(monkeypatch):
    """The note is printed once per process and key: each test starts before the first."""
    monkeypatch.setattr(renamed, "_NOTED", set())


def _old_style(tmp_path, text=None):
    path = tmp_path / "old.yaml"
    text = text or (BUILTIN_DIR / "smoke-resnet18.yaml").read_text()
    new_text = text.replace("lr_per_device:", "lr_per_gpu:")
    path.write_text(new_text.replace("batch_per_device:", "batch_per_gpu:"))
    return path


def test_a_recipe_file_with_the_old_keys_reads_as_the_new_ones_with_one_note(tmp_path, capsys):
    path = _old_style(tmp_path)
    assert "batch_per_gpu: 8" in path.read_text() and "lr_per_gpu: 0.01" in path.read_text()
    recipe = load_file(path)
    assert (recipe.train.batch_per_device, recipe.optimizer.lr_per_device) == (8, 0.01)
    assert recipe == load_recipe("smoke-resnet18")  # the same recipe, word for word
    err = capsys.readouterr().err
    assert err.count("Note: recipe key train.batch_per_gpu") == 1
    assert "read as train.batch_per_device" in err
    assert "To fix: write batch_per_device under train: instead" in err
    assert "read as optimizer.lr_per_device" in err
    load_file(path)  # read again: the note is not repeated
    assert capsys.readouterr().err == ""
    # an override under the new name wins over the file's old key, as over a new one
    assert load_file(path, ["train.batch_per_device=4"]).train.batch_per_device == 4


def test_both_names_at_once_is_an_error_that_says_which_to_keep(tmp_path):
    path = _old_style(tmp_path)
    path.write_text(
        path.read_text().replace("batch_per_gpu: 8", "batch_per_gpu: 8\n  batch_per_device: 4")
    )
    same = r"train\.batch_per_gpu and train\.batch_per_device"
    with pytest.raises(ConfigError, match=same) as info:
        load_file(path)
    assert "keep train.batch_per_device only" in str(info.value)


@pytest.mark.parametrize(
    ("override", "where", "value"),
    [
        ("train.batch_per_gpu=32", ("train", "batch_per_device"), 32),
        ("batch_per_gpu=16", ("train", "batch_per_device"), 16),
        ("optimizer.lr_per_gpu=0.5", ("optimizer", "lr_per_device"), 0.5),
        ("lr_per_gpu=0.25", ("optimizer", "lr_per_device"), 0.25),
    ],
)
def test_an_override_under_the_old_name_still_works(override, where, value, capsys):
    recipe = load_recipe("smoke-resnet18", [override])
    assert getattr(getattr(recipe, where[0]), where[1]) == value
    old = override.split("=")[0]
    err = capsys.readouterr().err
    assert f"Note: recipe key {old} (in an override) is deprecated and read as " in err
    assert f"To fix: write {'.'.join(where)} instead" in err  # the path an override takes


def test_the_cli_takes_an_old_override_and_notes_it_on_stderr():
    res = CliRunner().invoke(app, ["recipes", "show", "smoke-resnet18", "train.batch_per_gpu=32",
                                   "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["train"]["batch_per_device"] == 32  # stdout stays JSON
    assert "train.batch_per_gpu" in res.stderr and "train.batch_per_device" in res.stderr


def test_a_plan_stored_under_the_old_names_reads_silently(tiny_dataset, capsys):
    from finetune.plan.build import build_plan
    from finetune.plan.plan import Plan, Resources

    plan = build_plan("smoke-resnet18", tiny_dataset, Resources(), [])
    stored = json.loads(plan.to_json())
    train, opt = stored["recipe"]["train"], stored["recipe"]["optimizer"]
    train["batch_per_gpu"] = train.pop("batch_per_device")
    opt["lr_per_gpu"] = opt.pop("lr_per_device")
    back = Plan.from_json(json.dumps(stored))
    assert back == plan
    assert "batch_per_device" in back.to_json() and "per_gpu" not in back.to_json()
    assert capsys.readouterr().err == ""  # a record is not the user's to fix


def test_a_sweep_grid_under_the_old_name_still_works(tiny_dataset):
    args = ["sweep", "smoke-resnet18", "--dataset", str(tiny_dataset), "--dry-run", "--grid",
            "batch_per_gpu=4,8", "--format", "json"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert [c["global_batch"] for c in json.loads(res.stdout)["cells"]] == [4, 8]
    assert "batch_per_gpu" in res.stderr and "train.batch_per_device" in res.stderr
