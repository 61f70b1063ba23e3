"""Real training on CPU: a small GluonCV ResNet learns the generated shapes, on one and on
two CPU contexts (the multi-device path), from pretrained files made by the test."""

from __future__ import annotations

import json

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from finetune.contracts.container import Layout  # noqa: E402
from finetune.contracts.metrics import read as read_metrics  # noqa: E402
from finetune.train.engines.mxnet import RUNTIME  # noqa: E402
from finetune.train.layout import load_job  # noqa: E402
from tests.train.conftest import hparams, make_tree  # noqa: E402
from tests.train.weightfiles import save_symbol_checkpoint, save_zoo_params  # noqa: E402

pytestmark = [
    pytest.mark.mxnet,
    # SymbolBlock.imports of the exported model: its untyped "data" input is expected
    pytest.mark.filterwarnings("ignore:Cannot decide type:UserWarning"),
]


def _train(root):
    result = RUNTIME.fit(load_job(Layout(root)))
    return result, read_metrics(root / "output" / "data" / "metrics.jsonl")


@pytest.mark.slow
def test_learns_clearly_above_chance(tmp_path, tiny_dataset):
    """Seven epochs, not eight: validation accuracy by epoch, measured (2026-11-27), seed 1:
    .125 .146 .146 .396 .417 .417 .479 | .396; seed 2: .188 .25 .375 .396 .521 .396 .479 |
    .458; seed 3: .104 .229 .229 .271 .333 .479 .5 | .396. The eighth epoch was never the
    best of the last three, so the best of the last three is what it was with eight epochs
    (.479, .521, .5 against the bar of .3125)."""
    root = make_tree(tmp_path / "ml", tiny_dataset, hparams(epochs=7, image_size=40, seed=1))
    result, events = _train(root)
    assert result.stopped_by is None
    assert [e.epoch for e in events] == list(range(7))
    for e in events:
        assert e.samples == 80 and e.samples_per_sec > 0 and e.epoch_seconds > 0
        assert e.devices == 1 and e.lr == pytest.approx(0.001)
        assert e.val_top_k >= e.val_acc
    chance = 1 / 8
    assert max(e.val_acc for e in events[-3:]) >= 2.5 * chance, [e.val_acc for e in events]
    assert events[-1].train_loss < events[0].train_loss

    # the artifact is usable without this package: SymbolBlock.imports + classes.json
    model_dir = root / "model"
    net = mx.gluon.SymbolBlock.imports(
        str(model_dir / "model-symbol.json"), ["data"], str(model_dir / "model-0000.params")
    )
    assert net(mx.nd.zeros((1, 3, 40, 40))).shape == (1, 8)
    assert len(json.loads((model_dir / "classes.json").read_text())["classes"]) == 8


@pytest.mark.slow
def test_two_cpu_contexts_through_the_multi_device_path(tmp_path, tiny_dataset):
    hp = hparams(epochs=2, devices_per_host=2, global_batch=16, lr=0.002)
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    result, events = _train(root)
    assert [e.devices for e in events] == [2, 2]
    assert [e.samples for e in events] == [80, 80]
    assert result.progress.step == 2 * 5  # 80 images in global batches of 16
    state = json.loads(
        sorted((root / "checkpoints").glob("ckpt-*"))[-1].joinpath("state.json").read_text()
    )
    assert (state["epoch"], state["step"]) == (2, 10)


@pytest.mark.slow
def test_pretrained_file_from_the_cache_with_a_frozen_backbone(tmp_path, tiny_dataset, monkeypatch):
    """'ImageNet weights' saved by the test into $MXNET_HOME/models: the backbone is loaded
    and, frozen, still equal to the file after training; the head has 8 classes."""
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "mxhome"))
    saved = save_zoo_params(tmp_path / "mxhome" / "models" / "resnet18_v1.params")
    hp = hparams(epochs=1, max_batches_per_epoch=3, pretrained=True, freeze_backbone=True)
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    _, events = _train(root)
    assert len(events) == 1
    trained = mx.nd.load(str(sorted((root / "checkpoints").glob("ckpt-*"))[-1] / "model.params"))
    np.testing.assert_array_equal(
        trained["features.0.weight"].asnumpy(), saved["features.0.weight"]
    )
    assert trained["output.weight"].shape == (8, 512)
    assert not np.array_equal(
        trained["output.weight"].asnumpy()[:, :4], saved["output.weight"][:8, :4]
    )


@pytest.mark.slow
def test_imagenet11k_symbol_checkpoint_from_the_pretrained_channel(tmp_path, tiny_dataset):
    hp = hparams(model="imagenet11k-resnet-152", pretrained=True, epochs=1, max_batches_per_epoch=2)
    channels = ("train", "validation", "pretrained")
    root = make_tree(tmp_path / "ml", tiny_dataset, hp, channels)
    save_symbol_checkpoint(root / "input" / "data" / "pretrained" / "resnet-152", classes=11)
    _, events = _train(root)
    assert len(events) == 1 and events[0].samples == 16
    net = mx.gluon.SymbolBlock.imports(
        str(root / "model" / "model-symbol.json"),
        ["data"],
        str(root / "model" / "model-0000.params"),
    )
    assert net(mx.nd.zeros((1, 3, 32, 32))).shape == (1, 8)
