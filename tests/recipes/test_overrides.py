"""key=value overrides: dotted keys, short leaf names, YAML typing, clear errors."""

from __future__ import annotations

import pytest

from finetune.errors import ConfigError
from finetune.recipes.loading import load_recipe, with_overrides
from finetune.recipes.overrides import apply_overrides, parse_override, resolve_key


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("epochs=2", ("schedule.epochs", 2)),
        ("optimizer.lr_per_device=0.002", ("optimizer.lr_per_device", 0.002)),
        ("model.pretrained=false", ("model.pretrained", False)),
        ("steps=[4, 5]", ("schedule.steps", [4, 5])),
        ("kind = cosine", ("schedule.kind", "cosine")),
        ("model.name=1", ("model.name", "1")),  # text fields keep the text
        ("model.weights=", ("model.weights", "")),
        ("data.dataset=null", ("data.dataset", None)),
        ("dataset=yes", ("data.dataset", "yes")),  # not YAML 1.1's True
        ("name=my-run", ("name", "my-run")),  # exact top-level path beats the leaf
        ("train.kvstore=dist_sync", ("train.kvstore", "dist_sync")),
        ("lr=0.02", ("optimizer.lr_per_device", 0.02)),  # the short names people type
        ("batch=16", ("train.batch_per_device", 16)),
        ("model=resnet50_v1", ("model.name", "resnet50_v1")),
        ("model=1", ("model.name", "1")),  # an alias of a text field keeps the text
    ],
)
def test_parse_override(text, expect):
    assert parse_override(text) == expect


def test_unknown_key_suggests_the_dotted_path():
    with pytest.raises(ConfigError, match=r'Did you mean "optimizer\.lr_per_device"') as info:
        parse_override("optimizer.lr_per_gpy=0.1")
    assert "To fix:" in str(info.value) and "schedule.epochs" in str(info.value)
    with pytest.raises(ConfigError, match='Did you mean "epochs"'):
        parse_override("epohcs=2")


@pytest.mark.parametrize(
    ("text", "match"),
    [("epochs", "not KEY=VALUE"), ("=2", "not KEY=VALUE"), ("schedule=2", "is a section")],
)
def test_malformed_overrides(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_override(text)


def test_bad_yaml_value():
    with pytest.raises(ConfigError, match="not a YAML value"):
        parse_override("steps=[1, 2")


def test_ambiguous_leaf():
    """Today's Recipe has no leaf in two sections (``name`` is a top-level key, so it wins);
    the rule is checked on a set of paths that has one."""
    assert resolve_key("name") == "name"
    with pytest.raises(ConfigError, match=r"ambiguous: a\.x, b\.x") as err:
        resolve_key("x", ("a.x", "b.x", "c.y"))
    assert "full dotted key" in str(err.value)
    assert resolve_key("y", ("a.x", "b.x", "c.y")) == "c.y"


def test_apply_does_not_touch_the_input_and_last_wins():
    data = {"schedule": {"epochs": 6}}
    out = apply_overrides(data, ["epochs=2", "schedule.epochs=3", "optimizer.wd=0"])
    assert data == {"schedule": {"epochs": 6}}
    assert out == {"schedule": {"epochs": 3}, "optimizer": {"wd": 0}}


def test_overrides_on_load_are_validated():
    recipe = load_recipe("caltech256-resnet152", ["epochs=2", "optimizer.lr_per_device=0.002"])
    assert (recipe.schedule.epochs, recipe.optimizer.lr_per_device) == (2, 0.002)
    with pytest.raises(ConfigError, match=r"schedule\.kind.*'constant', 'step' or 'cosine'"):
        load_recipe("caltech256-resnet152", ["kind=linear"])
    with pytest.raises(
        ConfigError, match=r"(?s)with epochs=0.*schedule.epochs: Input should be greater than 0"
    ):
        load_recipe("caltech256-resnet152", ["epochs=0"])


def test_fewer_epochs_keep_only_the_decay_steps_inside_the_run():
    recipe = load_recipe("smoke-resnet18", ["epochs=1"])  # its step is at epoch 1
    assert (recipe.schedule.epochs, recipe.schedule.steps, recipe.schedule.kind) == (1, (), "step")
    longer = load_recipe("smoke-resnet18", ["epochs=3"])
    assert longer.schedule.steps == (1,)
    assert load_recipe("smoke-resnet18", ["epochs=1", "kind=constant"]).schedule.epochs == 1
    with pytest.raises(ConfigError) as info:  # steps given with the epochs: said exactly
        load_recipe("smoke-resnet18", ["epochs=1", "steps=[1]"])
    assert "set schedule.steps=[] (or schedule.kind=constant)" in str(info.value)
    assert "To fix:" in str(info.value)


def test_with_overrides_on_a_loaded_recipe():
    recipe = load_recipe("smoke-resnet18")
    assert with_overrides(recipe, []) is recipe
    changed = with_overrides(recipe, ["warmup_steps=3", "batch_per_device=4"])
    assert (changed.schedule.warmup_steps, changed.train.batch_per_device) == (3, 4)
    assert recipe.train.batch_per_device == 8
