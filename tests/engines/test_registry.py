"""The engines' registry: one spec per engine, the only place their names are listed.
Outside an engine's own plugin (its spec module and its runtime package) no code compares a
value with an engine's name; it asks the spec a question instead."""

from __future__ import annotations

import ast
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from finetune.catalog import engines as catalog_engines
from finetune.contracts import engine as engine_contract
from finetune.contracts.hparams import Augmentation
from finetune.engines import backbones, models, registry
from finetune.engines.mxnet import MXNET, SYMBOL_MODELS
from finetune.engines.torch import TORCH
from finetune.errors import ConfigError, UsageError

FINETUNE = Path(__file__).resolve().parents[2] / "finetune"
ENGINES_DIR = FINETUNE / "train" / "engines"  # the engines' runtimes
REGISTRY_DIR = FINETUNE / "engines"  # their specs: the one place that lists them
NAMES = set(registry.NAMES)


def _named(node: ast.AST) -> bool:
    """An engine's name as a literal, alone or inside a tuple, list or set literal."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_named(e) for e in node.elts)
    return False


def name_comparisons(source: str) -> list[int]:
    """Lines of every comparison or membership test against an engine's name literal
    (==, !=, in, not in, is; either side) in ``source``."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Compare)
        and any(_named(side) for side in (node.left, *node.comparators))
    ]


def test_no_module_outside_the_engines_compares_an_engine_name():
    outside = [
        p for p in FINETUNE.rglob("*.py") if not {ENGINES_DIR, REGISTRY_DIR} & set(p.parents)
    ]
    assert len(outside) > 100  # the walk found the package
    found = [
        f"{path.relative_to(FINETUNE.parent)}:{line}"
        for path in sorted(outside)
        for line in name_comparisons(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "ask the engine's descriptor (finetune.engines.registry)"


def test_the_walk_sees_every_kind_of_comparison():
    source = (
        'a = e == "torch"\nb = "mxnet" != e\nc = e in ("torch", "x")\nd = e not in {"mxnet"}\n'
        "ok = e == registry.DEFAULT\nf = {'torch': 1}\n"
    )
    assert name_comparisons(source) == [1, 2, 3, 4]


def test_one_list_of_names():
    assert registry.NAMES == ("mxnet", "torch") == tuple(registry.ENGINES)
    assert registry.DEFAULT in registry.NAMES
    for engine in registry.all_engines():
        # the name is written once: the options' discriminator literal is the spec's name
        (literal,) = typing.get_args(engine.options.model_fields["engine"].annotation)
        assert engine.name == engine.build.engine == literal


def test_an_unknown_engine_is_refused_with_a_suggestion():
    with pytest.raises(ConfigError, match=r'unknown engine "torc"\. Did you mean "torch"'):
        registry.get("torc")
    with pytest.raises(UsageError, match=r'unknown engine "mxnt"\. Did you mean "mxnet"'):
        catalog_engines.build("mxnt")
    with pytest.raises(ConfigError, match="unknown engine"):
        models.check_model("jax", "resnet50")


@pytest.mark.parametrize("name", registry.NAMES)
def test_each_descriptor_is_consistent_with_the_tables_it_replaces(name):
    engine = registry.get(name)
    assert (
        models.MODELS[name] == engine.models and models.AUGMENTATIONS[name] == engine.augmentations
    )
    assert set(engine.augmentations) <= set(typing.get_args(Augmentation))
    assert catalog_engines.BUILDS[name] == engine.build
    assert engine.resnet.format(depth=50) in engine.models  # a sweep's ResNet rename
    assert not engine.default_model or engine.default_model in engine.models
    # mean/std: fixed (0-255) or each model's own, never missing
    assert (engine.mean is None) == (engine.std is None) == (engine.rules is not None)
    from finetune.estimate.perf import pipeline

    assert engine.decoder in pipeline.decoders()


@pytest.mark.parametrize("name", registry.NAMES)
def test_the_runtime_is_the_engines_and_imports_no_framework(name):
    """Its runtime loads in a fresh process without importing its framework (a launch asks
    it where weights come from), and it is the engine's own package."""
    code = (
        "import sys; from finetune.contracts.engine import runtime; "
        f"r = runtime({name!r}); print(type(r).__module__, "
        "[m for m in ('torch', 'mxnet', 'torchvision') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(" ", 1) == [f"finetune.train.engines.{name}", "[]\n"]
    assert registry.get(name).runtime == f"finetune.train.engines.{name}:RUNTIME"


def test_an_unknown_engines_runtime_is_refused():
    with pytest.raises(ConfigError, match='unknown engine "jax"'):
        engine_contract.runtime("jax")


def test_torch_models_are_torchvisions_networks():
    torchvision = pytest.importorskip("torchvision")
    assert TORCH.models == tuple(backbones.TABLE)
    assert set(TORCH.models) <= set(torchvision.models.list_models())


def test_mxnet_models_are_in_gluoncvs_model_zoo():
    pytest.importorskip("mxnet")
    from finetune.train.engines.mxnet import zoo

    listed = set(zoo.model_zoo().get_model_list())
    zoo_names = set(MXNET.models) - set(SYMBOL_MODELS)
    assert zoo_names and zoo_names <= listed


def test_a_torch_contract_never_gets_gluoncvs_defaults():
    from finetune.contracts.hparams import TrainHyperparameters

    base = dict(num_classes=3, num_training_samples=10, epochs=1, batch_per_device=2,
                global_batch=2, lr_per_device=0.1, lr=0.1)  # fmt: skip
    with pytest.raises(ValueError, match="the torch engine needs a model"):
        TrainHyperparameters(engine="torch", **base)
    with pytest.raises(ConfigError, match="is a mxnet model"):
        TrainHyperparameters(engine="torch", model="resnet50_v1", **base)  # no mean/std to take
    hp = TrainHyperparameters(engine="torch", model="efficientnet_v2_l", **base)
    assert (hp.mean, hp.std) == (backbones.TABLE["efficientnet_v2_l"].mean,) * 2
    # an MXNet map written before the torch engine still reads back as the studies' run
    old = TrainHyperparameters.from_strings({k: str(v) for k, v in base.items()})
    assert (old.engine, old.model, old.mean) == ("mxnet", "resnet50_v1", backbones.STUDY_MEAN)


@pytest.mark.parametrize("name", registry.NAMES)
def test_the_smoke_recipe_runs_its_engine(name):
    from finetune.recipes.loading import load_recipe

    assert load_recipe(registry.get(name).smoke_recipe).engine == name
