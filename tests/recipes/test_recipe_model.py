"""Recipe validation: typos and bad values fail before anything runs, with clear messages."""

from __future__ import annotations

import pytest

from finetune.errors import ConfigError
from finetune.recipes.loading import BUILTIN_DIR, load_file, read_mapping
from finetune.recipes.schema import Recipe, field_paths, validate_recipe


def _base() -> dict:
    return read_mapping(BUILTIN_DIR / "caltech256-resnet50.yaml")


def _error(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        validate_recipe(data, "test.yaml")
    text = str(info.value)
    assert "To fix:" in text
    return text


def test_recipe_is_frozen():
    recipe = validate_recipe(_base(), "x")
    with pytest.raises(ValueError):
        recipe.schedule.epochs = 3


def test_typo_in_a_key_gets_did_you_mean():
    data = _base()
    data["schedule"]["epoch"] = data["schedule"].pop("epochs")
    text = _error(data)
    assert 'schedule.epoch: unknown key. Did you mean "schedule.epochs"?' in text
    assert "schedule.epochs: required key is missing" in text


def test_typo_in_a_section_name():
    data = _base()
    data["optimiser"] = data.pop("optimizer")
    assert 'optimiser: unknown key. Did you mean "optimizer"?' in _error(data)


def test_bad_choice_names_the_allowed_values():
    data = _base()
    data["schedule"]["kind"] = "cosin"
    text = _error(data)
    assert "schedule.kind" in text and "'constant', 'step' or 'cosine'" in text
    assert 'Did you mean "cosine"?' in text


@pytest.mark.parametrize(
    ("section", "key", "value", "expect"),
    [
        (
            "optimizer",
            "lr_per_device",
            0,
            "optimizer.lr_per_device: Input should be greater than 0",
        ),
        ("train", "batch_per_device", "many", "train.batch_per_device"),
        ("optimizer", "momentum", 1.0, "optimizer.momentum"),
        ("schedule", "steps", [5, 2], "steps must be increasing"),
        # issue 49, item 7: a NaN step was accepted (the run never stepped), and a typo's
        # epoch count was planned as 948 years with a ready launch command
        ("schedule", "steps", [float("nan")], "schedule.steps.0: Input should be a finite"),
        ("schedule", "steps", [2, "inf"], "schedule.steps.1: Input should be a finite"),
        ("schedule", "epochs", 99999999999, "schedule.epochs: Input should be less than"),
        ("data", "image_size", 8, "data.image_size"),
    ],
)
def test_bad_values_name_the_key(section, key, value, expect):
    data = _base()
    data[section][key] = value
    assert expect in _error(data)


def test_a_decay_step_must_fall_inside_a_step_schedule():
    data = _base()
    data["schedule"].update(kind="step", steps=[2, 6])
    assert "epoch 6 not before epochs=6: set schedule.steps=[2] (or schedule.kind" in _error(data)
    data["schedule"]["kind"] = "cosine"  # other schedules never use the steps
    assert validate_recipe(data, "x").schedule.steps == (2, 6)


def test_warmup_in_epochs_or_steps_not_both():
    data = _base()
    data["schedule"].update(warmup_epochs=1, warmup_steps=10)
    assert "not both" in _error(data)


def test_non_mapping_and_bad_yaml(tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_file(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("model:\n  name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_file(broken)


def test_yaml_1_1_exponent_without_dot_still_is_a_float(tmp_path):
    # PyYAML reads `1e-4` as a string; the model must still take it as a number.
    text = (BUILTIN_DIR / "caltech256-resnet50.yaml").read_text()
    path = tmp_path / "r.yaml"
    path.write_text(text.replace("wd: 0.0001", "wd: 1e-4"))
    assert load_file(path).optimizer.wd == pytest.approx(1e-4)


def test_field_paths_cover_every_leaf():
    paths = field_paths()
    assert "schedule.epochs" in paths and "optimizer.lr_per_device" in paths
    assert "model" not in paths and "name" in paths
    assert len(paths) == len(set(paths))
    assert Recipe.model_config["extra"] == "forbid"
