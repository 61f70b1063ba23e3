"""Building the network: model-zoo ResNets, the 11k symbol checkpoint, heads and freezing."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from finetune.errors import ConfigError, DataError  # noqa: E402
from finetune.train.engines.mxnet import network  # noqa: E402
from finetune.train.engines.mxnet.weights import Weights  # noqa: E402
from tests.train.conftest import hparams  # noqa: E402
from tests.train.weightfiles import save_symbol_checkpoint, save_zoo_params  # noqa: E402

pytestmark = pytest.mark.mxnet
CPU = [mx.cpu()]


def _forward(net, size: int = 32):
    return net(mx.nd.zeros((2, 3, size, size)))


def test_unknown_model_suggests_the_closest():
    with pytest.raises(ConfigError) as err:
        network.check_name("resnet50_v1x")
    assert 'Did you mean "resnet50_v1' in str(err.value)
    assert "resnet152_v1d" in str(err.value)


@pytest.mark.parametrize("name", ["resnet18_v1", "resnet18_v1b", "resnet18_v2"])
def test_random_init_has_the_dataset_head(name):
    net = network.build(hparams(model=name), CPU, None)
    assert _forward(net).shape == (2, 8)


def test_pretrained_backbone_is_loaded_and_head_replaced(tmp_path):
    saved = save_zoo_params(tmp_path / "resnet18_v1.params")
    hp = hparams(pretrained=True, head_lr_mult=10.0)
    net = network.build(hp, CPU, Weights(tmp_path / "resnet18_v1.params"))
    assert _forward(net).shape == (2, 8)
    first_conv = net.features[0].weight.data().asnumpy()
    np.testing.assert_array_equal(first_conv, saved["features.0.weight"])
    assert net.output.weight.shape == (8, 512)
    assert net.output.weight.lr_mult == 10.0
    assert net.features[0].weight.lr_mult == 1.0
    assert net.features[0].weight.grad_req == "write"


def test_fine_tuning_starts_from_every_source_entry_and_its_features(tmp_path):
    """Issue 50's first suspect: all of the source's entries but its head, BatchNorm's trained
    running statistics included, reach the fine-tuning network, which then computes the
    source network's features to the bit, hybridized as the session runs it."""
    from finetune.train.engines.mxnet.zoo import model_zoo

    source = model_zoo().get_model("resnet18_v1", pretrained=False, classes=8)
    source.initialize(mx.init.Xavier())
    x = mx.nd.random.uniform(-2, 2, shape=(4, 3, 32, 32))
    with mx.autograd.record():  # MXNet moves the running statistics in the backward pass
        source(x).backward()
    source.save_parameters(str(tmp_path / "source.params"))
    saved = {k: v.asnumpy() for k, v in mx.nd.load(str(tmp_path / "source.params")).items()}
    assert not np.allclose(saved["features.1.running_var"], 1.0)  # trained, not initial
    net = network.build(
        hparams(num_classes=6, pretrained=True), CPU, Weights(tmp_path / "source.params")
    )
    loaded = {k: p.data().asnumpy() for k, p in net._collect_params_with_prefix().items()}
    body = {k for k in saved if not k.startswith("output.")}
    assert body == {k for k in loaded if not k.startswith("output.")}
    for key in body:
        np.testing.assert_array_equal(loaded[key], saved[key], err_msg=key)
    net.hybridize(static_alloc=True, static_shape=True)
    np.testing.assert_array_equal(net.features(x).asnumpy(), source.features(x).asnumpy())
    assert net.output.weight.shape == (6, 512)


def test_freeze_backbone_leaves_only_the_head_trainable(tmp_path):
    save_zoo_params(tmp_path / "w.params", "resnet18_v1b")
    hp = hparams(model="resnet18_v1b", pretrained=True, freeze_backbone=True)
    net = network.build(hp, CPU, Weights(tmp_path / "w.params"))
    trainable = {k for k, p in net.collect_params().items() if p.grad_req != "null"}
    assert trainable == set(net.fc.collect_params().keys())
    assert net.fc.weight.shape == (8, 512)


def test_weights_of_another_architecture_are_refused(tmp_path):
    save_zoo_params(tmp_path / "r18.params", "resnet18_v1")
    with pytest.raises(DataError, match="do not fit the model"):
        network.build(
            hparams(model="resnet34_v1", pretrained=True), CPU, Weights(tmp_path / "r18.params")
        )


def test_a_file_that_is_not_gluon_parameters(tmp_path):
    (tmp_path / "junk.params").write_bytes(b"\x00" * 64)
    with pytest.raises(DataError, match="not an MXNet parameter file"):
        network.build(hparams(pretrained=True), CPU, Weights(tmp_path / "junk.params"))


def test_symbol_checkpoint_is_cut_before_its_classifier(tmp_path):
    args = save_symbol_checkpoint(tmp_path / "resnet-152", classes=11)
    w = Weights(tmp_path / "resnet-152-0000.params", tmp_path / "resnet-152-symbol.json")
    net = network.build(hparams(model="imagenet11k-resnet-152", pretrained=True), CPU, w)
    net.hybridize()
    assert _forward(net).shape == (2, 8)
    loaded = net.features.collect_params()
    np.testing.assert_array_equal(loaded["conv0_weight"].data().asnumpy(), args["conv0_weight"])
    assert "fc1_weight" not in loaded  # the 11k classifier is cut away


def test_gluoncv_imports_beside_a_current_torch():
    """gluoncv 0.10.5 raises at import when torch >= 2.0 is installed; the engine imports it
    with torch hidden, and leaves an already imported torch in place."""
    torch = pytest.importorskip("torch")
    import sys

    from finetune.train.engines.mxnet.zoo import model_zoo

    assert model_zoo().get_model("resnet18_v1", pretrained=False, classes=3) is not None
    assert sys.modules["torch"] is torch
