"""The bundled recipes: valid, named after their files, documented, and in one copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from finetune.errors import ConfigError
from finetune.recipes.loading import BUILTIN_DIR, available, load_file, load_recipe

REPO = Path(__file__).resolve().parents[2]
BUNDLED = sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def test_required_recipes_are_bundled():
    assert {"caltech256-resnet152", "caltech256-resnet50"} <= set(BUNDLED)
    assert any(name.startswith("smoke") for name in BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_recipe_validates_and_names_its_command(name):
    recipe = load_recipe(name)
    assert recipe.name == name
    header = (BUILTIN_DIR / f"{name}.yaml").read_text().split("\nname:")[0]
    assert f"finetune launch {name} " in header, "the header must give the exact command"


def test_reference_recipes_match_the_mxnet_study():
    r152 = load_recipe("caltech256-resnet152")
    assert r152.model.name == "imagenet11k-resnet-152"
    assert (r152.train.batch_per_device, r152.optimizer.lr_per_device) == (16, 0.00125)
    assert (r152.optimizer.name, r152.optimizer.momentum, r152.optimizer.wd) == ("sgd", 0.9, 1e-4)
    assert (r152.schedule.epochs, r152.data.image_size) == (6, 224)
    r50 = load_recipe("caltech256-resnet50")
    assert (r50.model.name, r50.model.pretrained) == ("resnet50_v1", True)
    assert r50.train.batch_per_device in (16, 32) and r50.optimizer.lr_per_device in (
        0.00125,
        0.0025,
    )


def test_smoke_recipe_is_small():
    smoke = load_recipe("smoke-resnet18")
    assert smoke.model.name == "resnet18_v1" and not smoke.model.pretrained
    assert (smoke.data.image_size, smoke.train.batch_per_device, smoke.schedule.epochs) == (
        32,
        8,
        2,
    )


# (recipe, model, optimizer, reference rate, reference global batch): torchvision's reference
# commands (references/classification/README.md); ViT-B/16 follows the ViT paper's transfer
# recipe (SGD, 0.003 for 512 images) instead
NEW_FAMILIES = [
    ("caltech256-convnext-tiny", "convnext_tiny", "adam", 1e-3 / 5, 1024),
    ("caltech256-efficientnet-v2-s", "efficientnet_v2_s", "sgd", 0.5 / 5, 1024),
    ("caltech256-vit-b16", "vit_b_16", "sgd", 0.003, 512),
]


@pytest.mark.parametrize(("name", "model", "optimizer", "rate", "batch"), NEW_FAMILIES)
def test_new_family_recipes_state_their_source_and_arithmetic(name, model, optimizer, rate, batch):
    """The per-GPU rate is the source's rate per image (a fifth of torchvision's training
    rate, or the ViT paper's fine-tuning rate) times the per-GPU batch; the header cites the
    source and shows the arithmetic; the smoke variant trains the same model and optimizer
    kind from random weights at 32 px."""
    r = load_recipe(name)
    assert (r.engine, r.model.name, r.model.pretrained, r.optimizer.name) == (
        "torch",
        model,
        True,
        optimizer,
    )
    assert r.optimizer.lr_per_device == pytest.approx(rate / batch * r.train.batch_per_device)
    header = (BUILTIN_DIR / f"{name}.yaml").read_text().split("\nname:")[0]
    assert "references/classification/README.md" in header and "per GPU" in header
    assert f"{r.optimizer.lr_per_device:g}".replace("e-05", "e-5") in header  # the result shown
    smoke = load_recipe(name.replace("caltech256-", "smoke-"))
    assert (smoke.model.name, smoke.model.pretrained, smoke.optimizer.name) == (
        model,
        False,
        optimizer,
    )
    assert (smoke.data.image_size, smoke.schedule.epochs, smoke.train.max_batches_per_epoch) == (
        32,
        1,
        2,
    )


def test_top_level_recipes_folder_holds_the_same_files():
    top = REPO / "recipes"
    assert sorted(p.stem for p in top.glob("*.yaml")) == BUNDLED
    for name in BUNDLED:
        assert (top / f"{name}.yaml").read_bytes() == (BUILTIN_DIR / f"{name}.yaml").read_bytes()


def test_project_recipes_folder_is_searched_first(tmp_path, monkeypatch):
    own = tmp_path / "recipes"
    own.mkdir()
    text = (BUILTIN_DIR / "smoke-resnet18.yaml").read_text()
    (own / "smoke-resnet18.yaml").write_text(text.replace("epochs: 2", "epochs: 3"))
    (own / "mine.yaml").write_text(text.replace("name: smoke-resnet18", "name: mine"))
    monkeypatch.chdir(tmp_path)
    found = available()
    assert found["mine"].origin == "project"
    assert found["smoke-resnet18"].origin == "project"
    assert found["caltech256-resnet50"].origin == "builtin"
    assert load_recipe("smoke-resnet18").schedule.epochs == 3


def test_name_defaults_to_file_stem_and_must_match_when_found_by_name(tmp_path, monkeypatch):
    text = (BUILTIN_DIR / "smoke-resnet18.yaml").read_text()
    path = tmp_path / "nameless.yaml"
    path.write_text(text.replace("name: smoke-resnet18\n", ""))
    assert load_file(path).name == "nameless"
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "other.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="differs from its file name"):
        load_recipe("other")
    assert load_recipe("recipes/other.yaml").name == "smoke-resnet18"  # by path: allowed


def test_unknown_recipe_name_suggests(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match='Did you mean "caltech256-resnet50"') as info:
        load_recipe("caltech256-resnet5O")
    assert "To fix:" in str(info.value)
    with pytest.raises(ConfigError, match="does not exist"):
        load_recipe(tmp_path / "missing.yaml")
