"""The torch engine's model table (finetune.engines.backbones) against the installed
torchvision, the head each family replaces, a frozen backbone's normalisation layers, and the
plan-time checks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from torch import nn  # noqa: E402

from finetune.engines import backbones  # noqa: E402
from finetune.engines.models import check_model  # noqa: E402
from finetune.errors import ConfigError  # noqa: E402
from finetune.train.engines.torch import network  # noqa: E402
from finetune.train.engines.torch import weights as wt  # noqa: E402

from ...conftest import hparams  # noqa: E402

ASKED = {  # issue 24's families, each with the members it names
    "resnet": 5, "resnext": 3, "wide_resnet": 2, "convnext": 4, "efficientnet": 8,
    "efficientnet_v2": 3, "regnet": 14, "mobilenet_v3": 2, "vit": 3, "swin": 3, "swin_v2": 3,
    "maxvit": 1,
}  # fmt: skip


def test_every_family_is_in_the_table_with_torchvisions_weights_enum():
    from torchvision import models

    counts: dict[str, int] = {}
    for name, row in backbones.TABLE.items():
        counts[row.family] = counts.get(row.family, 0) + 1
        enum = models.get_model_weights(name)
        assert enum.__name__ == row.weights, name
        # the variant the engine prefers in torch hub's cache (weights.VARIANTS order)
        assert row.variant == next(v for v in wt.VARIANTS if v in enum.__members__), name
    assert counts == ASKED


@pytest.mark.parametrize("name", sorted(backbones.TABLE))
def test_the_contract_copies_the_weights_own_evaluation_transform(name):
    """torchvision's weights.transforms() says crop, resize, interpolation and mean/std (0-1):
    the row holds the same (x 255). ResNets keep the studies' contract instead."""
    from torchvision import models

    row = backbones.TABLE[name]
    t = models.get_model_weights(name)[row.variant].transforms()
    if row.family == "resnet":
        assert (row.crop, row.resize, row.interpolation) == (224, 256, "bilinear")
        assert (row.mean, row.std) == (backbones.STUDY_MEAN, backbones.STUDY_STD)
        return
    assert (row.crop, row.resize) == (t.crop_size[0], t.resize_size[0])
    assert row.interpolation == t.interpolation.value
    assert row.mean == pytest.approx([255 * m for m in t.mean], abs=1e-9)
    assert row.std == pytest.approx([255 * s for s in t.std], abs=1e-9)
    fields = backbones.preprocessing(name, row.crop)
    assert fields["resize_shorter"] == row.resize  # at the weights' own size: their resize


FIRST_OF_FAMILY = {}
for _row in backbones.TABLE.values():  # the family's first (smallest) member
    FIRST_OF_FAMILY.setdefault(_row.family, _row.name)


@pytest.mark.parametrize("name", sorted(FIRST_OF_FAMILY.values()))
def test_the_head_is_the_networks_last_linear_layer(name):
    """Built on the meta device (shapes only; RegNet's builder reads values, so on the CPU):
    the family's head path names the network's last nn.Linear, with ImageNet's 1000
    outputs; replacing it keeps its inputs and bias and gives the keys a network built for
    N classes has."""
    row = backbones.TABLE[name]
    with torch.device("cpu" if row.family == "regnet" else "meta"):
        net = network.construct(name, 1000, row.crop)
        linears = [n for n, m in net.named_modules() if isinstance(m, nn.Linear)]
        old = net.get_submodule(row.head)
        assert linears[-1] == row.head and old.out_features == 1000
        network.replace_head(net, row.head, 7)
        new = net.get_submodule(row.head)
        assert (new.in_features, new.out_features) == (old.in_features, 7)
        assert (new.bias is None) == (old.bias is None)  # MaxViT's head has no bias
        direct = network.construct(name, 7, row.crop)
    shapes = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in direct.state_dict().items()}


@pytest.mark.parametrize("name", sorted(FIRST_OF_FAMILY.values()))
def test_layer_decay_is_refused_at_plan_time_exactly_where_the_engine_knows_no_depths(name):
    """The oracle is the engine's own depth map of the built network (optim.layer_depths):
    where it orders every parameter, the plan lets layer_decay < 1 through; where it cannot,
    the plan refuses before anything is launched, naming the key and the fix."""
    from finetune.train.engines.torch.optim import layer_depths

    row = backbones.TABLE[name]
    with torch.device("cpu" if row.family == "regnet" else "meta"):
        net = network.construct(name, 10, row.crop)
    try:
        depths = layer_depths(net)
    except ConfigError:
        depths = None
    backbones.check_layer_decay(name, 1.0)  # off: any network
    if depths is not None:
        assert max(depths.values()) >= 3 and min(depths.values()) == 0  # head 0, body deeper
        backbones.check_layer_decay(name, 0.7)
    else:
        with pytest.raises(ConfigError, match=r"(?s)optimizer.layer_decay=0.7.*layer_decay=1"):
            backbones.check_layer_decay(name, 0.7)


def test_a_launch_with_layer_decay_on_regnet_stops_at_the_plan(tiny_dataset):
    from typer.testing import CliRunner

    from finetune.cli import app

    args = ["launch", "smoke-convnext-tiny", "--dataset", str(tiny_dataset), "--dry-run"]
    res = CliRunner().invoke(app, [*args, "model.name=regnet_y_400mf", "optimizer.layer_decay=0.7"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "optimizer.layer_decay=0.7" in res.output and "regnet_y_400mf" in res.output
    ok = CliRunner().invoke(app, [*args, "model.name=convnext_tiny", "optimizer.layer_decay=0.7"])
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "convnext_tiny"])
def test_a_frozen_backbone_keeps_its_normalisation_and_weights(name):
    """Two SGD steps with a frozen backbone: every backbone parameter and buffer (BatchNorm
    running statistics; LayerNorm's scale and shift) is bit-identical, the head moved."""
    hp = hparams(engine="torch", model=name, freeze_backbone=True, num_classes=3,
                 optimizer="sgd", lr=0.5, lr_per_device=0.5)  # fmt: skip
    torch.manual_seed(0)
    net, _ = network.build(hp, None)
    (head,) = network.heads(name)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    groups = network.param_groups(net, hp)
    assert len(groups) == 1 and groups[0]["lr_mult"] == hp.head_lr_mult  # the head alone
    opt = torch.optim.SGD(groups, lr=0.5)
    network.train_mode(net, True, "batch", (head,))
    norms = [m for n, m in net.named_modules() if isinstance(m, network.NORMS)]
    assert norms and not any(m.training for m in norms)
    assert net.get_submodule(head).training
    for _ in range(2):
        x = torch.randn(4, 3, 32, 32)
        loss = nn.functional.cross_entropy(net(x), torch.tensor([0, 1, 2, 0]))
        loss.backward()
        opt.step()
        opt.zero_grad()
    after = net.state_dict()
    moved = [k for k in after if not torch.equal(after[k], before[k])]
    assert moved and all(k.startswith(head + ".") for k in moved), moved


def test_batchnorm_frozen_keeps_a_layernorm_network_training():
    """batchnorm=frozen concerns BatchNorm only: LayerNorm stays in training mode."""
    with torch.device("meta"):  # modes only: no weights needed
        net = network.construct("convnext_tiny", 3, 32)
    network.train_mode(net, False, "frozen", ("classifier.2",))
    assert all(m.training for m in net.modules())


@pytest.mark.slow  # two ViT-B/32s (88 M parameters each) and a 350 MB weight file
def test_vit_position_embeddings_follow_the_image_size(tmp_path):
    """ViT weights made at 64 px (4 patches of 32) load into a 96 px run (9 patches): the
    position embeddings are resampled, the class token's kept."""
    torch.manual_seed(0)
    small = network.construct("vit_b_32", 1000, 64)
    path = tmp_path / "vit_b_32.pth"
    torch.save(small.state_dict(), path)
    hp = hparams(engine="torch", model="vit_b_32", image_size=96, num_classes=3, pretrained=True)
    net, loaded = network.build(hp, wt.Found(path, None))
    pos = net.state_dict()["encoder.pos_embedding"]
    assert pos.shape == (1, 10, 768) and loaded["sha256"]
    torch.testing.assert_close(pos[:, :1], small.state_dict()["encoder.pos_embedding"][:, :1])
    assert net(torch.zeros(1, 3, 96, 96)).shape == (1, 3)


def test_names_and_sizes_are_checked_with_clear_errors():
    check_model("torch", "swin_v2_b")
    with pytest.raises(ConfigError, match=r"unknown model 'convnext_tiniest'.*convnext_tiny") as e:
        check_model("torch", "convnext_tiniest")
    assert "vit: vit_b_16, vit_b_32, vit_l_16" in str(e.value)  # the known ones, per family
    with pytest.raises(ConfigError, match=r"torch model.*mxnet engine \(it builds GluonCV"):
        check_model("mxnet", "efficientnet_v2_s")
    with pytest.raises(ConfigError, match=r"(?s)multiples of 16, not .*=40.*=32 or 48"):
        backbones.check_image_size("vit_b_16", 40)
    with pytest.raises(ConfigError, match="multiples of 224"):
        backbones.check_image_size("maxvit_t", 32)
    backbones.check_image_size("swin_t", 37)  # windows pad: any size


def test_bicubic_resize_agrees_between_the_resident_path_and_the_reference(image_folder, tmp_path):
    """The contract's bicubic resize (EfficientNet-B*, Swin, MaxViT weights): torchvision's
    antialiased bicubic on the device against Pillow's BICUBIC (the reference, the streaming
    path): within about a grey level (measured: max 1.0 level, mean 0.003 of one; one level
    is 1/57 after normalisation). And it is bicubic: the bilinear resize differs."""
    import io

    import numpy as np
    from PIL import Image

    from finetune.data.datasets import prepare_folder
    from finetune.data.recordio import RecordReader, unpack_header
    from finetune.train.engines.torch import boxes
    from finetune.train.engines.torch.resident import ImageStore
    from finetune.train.preprocess import Preprocessing

    ds = tmp_path / "ds"
    prepare_folder(image_folder, ds, "shapes", dict(train_per_class=10, resize=64), workers=1)
    rec, idx = ds / "shapes_val.rec", ds / "shapes_val.idx"

    def resident(contract):
        store = ImageStore.load(rec, idx, contract, "cpu")
        box = boxes.center(store.widths, store.heights, 32)
        flip = torch.zeros(len(store), dtype=torch.bool)
        return store.crops(torch.arange(len(store)), box, 32, flip).numpy()

    bicubic = Preprocessing(image_size=32, resize_shorter=37, interpolation="bicubic")
    got = resident(bicubic)
    with RecordReader(rec, idx) as reader:
        images = [Image.open(io.BytesIO(unpack_header(reader.read_key(k))[1])) for k in reader.keys]
    mean = np.asarray(bicubic.mean, np.float32)[None, :, None, None]
    std = np.asarray(bicubic.std, np.float32)[None, :, None, None]
    ref = np.stack([bicubic.val_array(image) for image in images])
    diff = np.abs((got - mean) / std - ref)
    assert diff.max() <= 2 / 57 and diff.mean() <= 0.001, (diff.max(), diff.mean())
    bilinear = resident(bicubic.model_copy(update={"interpolation": "bilinear"}))
    assert np.abs(bilinear - got).max() >= 5  # grey levels: another filter


@pytest.mark.parametrize("name", ["efficientnet_v2_s", "efficientnet_b0"])
def test_efficientnet_residual_blocks_start_as_the_identity(name):
    """Issue 34, item 7: from random weights EfficientNetV2-S learned nothing at the smoke
    budget; its residual blocks now start as the identity (last BatchNorm scale 0)."""
    import torch
    from torchvision.models.efficientnet import FusedMBConv, MBConv

    from finetune.train.engines.torch.network import construct

    net = construct(name, 10, 32)
    blocks = [m for m in net.modules() if isinstance(m, MBConv | FusedMBConv)]
    residual = [b for b in blocks if b.use_res_connect]
    assert len(residual) >= 9
    for block in residual:
        channels = next(m for m in block.modules() if isinstance(m, torch.nn.Conv2d)).in_channels
        x = torch.randn(2, channels, 4, 4)
        assert torch.equal(block.eval()(x), x)
    assert any(not b.use_res_connect for b in blocks)  # the stage-opening blocks learn as built
