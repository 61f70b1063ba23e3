"""The torch engine's recipe features, each against a computation done by hand here: mixup and
cutmix, label smoothing and class weights, layer-wise rate decay and weight decay groups, the
weights' average, gradient clipping (with the fp16 scaler), the augmentation presets'
seeding; and the recipe keys, refused for the MXNet engine."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from finetune.contracts.hparams import TrainHyperparameters  # noqa: E402
from finetune.errors import ConfigError  # noqa: E402
from finetune.train.engines.torch import augment, criterion, ema, mixing, optim  # noqa: E402

from ...conftest import hparams  # noqa: E402


def thp(**overrides) -> TrainHyperparameters:
    base = dict(engine="torch", model="resnet18", loader_workers=0)
    base.update(overrides)
    return hparams(**base)


def _two_images():
    """Two 3x8x8 images of constant, different values, labels 2 and 5 of 6 classes."""
    a, b = torch.full((3, 8, 8), 1.0), torch.full((3, 8, 8), -3.0)
    a[0, 0, 0] = 7.0  # one odd pixel each, so a blend is not only two constants
    b[2, 7, 7] = 11.0
    return torch.stack([a, b]), torch.tensor([2, 5])


# ---- mixup and cutmix -------------------------------------------------------------------------
def _drawn(seed, epoch, position, *alphas):
    """The draws timm's Mixup makes from numpy's generator seeded (seed, epoch, position):
    whether to mix, then (both alphas set) whether cutmix, then lambda from Beta(a, a)."""
    rng = np.random.RandomState([seed, epoch, position, mixing.MIX_TAG])
    draws = [rng.rand()]
    if len(alphas) == 2:
        draws.append(rng.rand())
    return draws, rng.beta(alphas[-1], alphas[-1])


def test_mixup_of_two_known_images_is_the_hand_blend_and_its_soft_target():
    """Lambda is numpy's Beta(alpha, alpha) of the generator seeded (seed, epoch, position),
    computed again here; each image is blended with its mirror in the batch (of two: the
    other one) and its target is the same blend of one-hot labels."""
    x, y = _two_images()
    mixer = mixing.Mixer(num_classes=6, seed=4, mixup_alpha=0.4)
    (chance,), lam = _drawn(4, 1, 7, 0.4)
    assert chance < 1.0  # (mix_prob 1: always mixed)
    mixed, target = mixer.apply(x.clone(), y, epoch=1, position=7)
    assert torch.allclose(mixed[0], lam * x[0] + (1 - lam) * x[1], atol=1e-6)
    assert torch.allclose(mixed[1], lam * x[1] + (1 - lam) * x[0], atol=1e-6)
    assert mixed[0, 0, 0, 0].item() == pytest.approx(lam * 7 + (1 - lam) * -3, abs=1e-5)
    assert mixed[0, 2, 7, 7].item() == pytest.approx(lam * 1 + (1 - lam) * 11, abs=1e-5)
    assert target[0].tolist() == pytest.approx([0, 0, lam, 0, 0, 1 - lam])
    assert target[1].tolist() == pytest.approx([0, 0, 1 - lam, 0, 0, lam])
    assert target.dtype == torch.float32


def test_the_mixer_draws_by_position():
    """The same position draws the same; another position another; the draw leaves numpy's
    global generator as it found it."""
    x, y = _two_images()
    mixer = mixing.Mixer(num_classes=6, seed=4, mixup_alpha=0.4)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    out, _ = mixer.apply(x.clone(), y, epoch=1, position=7)
    assert np.array_equal(np.random.get_state()[1], before)
    again, _ = mixer.apply(x.clone(), y, epoch=1, position=7)
    assert torch.equal(out, again)
    other, _ = mixer.apply(x.clone(), y, epoch=1, position=8)
    assert not torch.equal(out, other)


def _kind(out, x) -> str:
    """cutmix pastes pixels (every value one of the two images'); mixup blends them."""
    return "cutmix" if set(out.unique().tolist()) <= set(x.unique().tolist()) else "mixup"


def test_mix_prob_zero_and_switch_choose_as_asked():
    x, y = _two_images()
    never = mixing.Mixer(num_classes=6, seed=0, mixup_alpha=1.0, prob=0.0)
    out, target = never.apply(x.clone(), y, 0, 0)
    assert torch.equal(out, x) and target.tolist() == torch.eye(6)[y].tolist()
    cut = mixing.Mixer(num_classes=6, seed=0, mixup_alpha=1.0, cutmix_alpha=1.0, switch_prob=1.0)
    assert {_kind(cut.apply(x.clone(), y, 0, p)[0], x) for p in range(20)} == {"cutmix"}
    blend = mixing.Mixer(num_classes=6, seed=0, mixup_alpha=1.0, cutmix_alpha=1.0, switch_prob=0.0)
    assert {_kind(blend.apply(x.clone(), y, 0, p)[0], x) for p in range(20)} == {"mixup"}


@pytest.mark.parametrize("alpha", [0.3, 1.0, 4.0])
def test_cutmix_box_area_matches_lambda(alpha):
    """The pasted pixels are exactly a box, the same in both images; the target's lambda is
    1 - box area / image area; an unclipped box's sides are sqrt(1 - lam) x the image's (to
    2 pixels), lam being the Beta draw of the position."""
    h = w = 40
    a, b = torch.zeros(1, 3, h, w), torch.ones(1, 3, h, w)
    mixer = mixing.Mixer(num_classes=2, seed=5, cutmix_alpha=alpha)
    for position in range(10):
        out, target = mixer.apply(torch.cat([a, b]), torch.tensor([0, 1]), 0, position)
        pasted = out[0, 0] == 1  # image 0 got image 1's pixels in the box
        area = int(pasted.sum())
        assert target[0, 0].item() == pytest.approx(1 - area / (h * w))
        assert torch.equal(out[1, 0] == 0, pasted)  # the same box the other way
        if not area:
            continue
        rows, cols = pasted.any(1).nonzero(), pasted.any(0).nonzero()
        y0, y1, x0, x1 = int(rows.min()), int(rows.max()) + 1, int(cols.min()), int(cols.max()) + 1
        assert area == (x1 - x0) * (y1 - y0)  # a box
        _, lam = _drawn(5, 0, position, alpha)
        if x0 > 0 and x1 < w and y0 > 0 and y1 < h:  # not clipped at an edge
            side = math.sqrt(1 - lam) * w
            assert 0 <= side - (x1 - x0) < 2 and 0 <= side - (y1 - y0) < 2


# ---- the loss ---------------------------------------------------------------------------------
def _log_softmax_by_hand(out):
    return [[v - math.log(sum(math.exp(u) for u in row)) for v in row] for row in out.tolist()]


def test_label_smoothing_loss_equals_the_hand_formula():
    torch.manual_seed(0)
    out, y, eps, k = torch.randn(5, 4), torch.tensor([0, 3, 1, 1, 2]), 0.1, 4
    logp = _log_softmax_by_hand(out)
    pairs = zip(logp, y.tolist(), strict=True)
    hand = sum(-(1 - eps) * row[t] - eps / k * sum(row) for row, t in pairs)
    got = criterion.Criterion(eps, None, "cpu")(out, y, None)
    assert got.item() == pytest.approx(hand / 5, rel=1e-5)
    # soft targets: the smoothed target is (1 - eps) * t + eps / k
    one = torch.eye(k)[y]
    t = 0.6 * one + 0.4 * one.flip(0)  # a mixed batch's targets (each with its mirror)
    hand = sum(
        -sum(((1 - eps) * tc + eps / k) * lc for tc, lc in zip(trow, row, strict=True))
        for trow, row in zip(t.tolist(), logp, strict=True)
    )
    assert criterion.Criterion(eps, None, "cpu")(out, y, t).item() == pytest.approx(
        hand / 5, rel=1e-5
    )


def test_class_weights_weigh_the_loss_by_the_label():
    torch.manual_seed(1)
    out, y, w = torch.randn(6, 3), torch.tensor([0, 1, 2, 2, 0, 2]), [0.5, 2.0, 1.5]
    logp = _log_softmax_by_hand(out)
    pairs = zip(logp, y.tolist(), strict=True)
    hand = sum(-w[t] * row[t] for row, t in pairs) / sum(w[t] for t in y.tolist())
    assert criterion.Criterion(0.0, w, "cpu")(out, y, None).item() == pytest.approx(hand, rel=1e-5)


def test_balanced_class_weights_are_n_over_k_times_the_count():
    counts = [10, 5, 1, 4]
    n, k = 20, 4
    hand = [n / (k * c) for c in counts]  # 0.5, 1.0, 5.0, 1.25
    assert criterion.balanced_weights(counts) == pytest.approx(hand)
    assert criterion.class_weights(thp(num_classes=4, class_weights="balanced"), counts) == hand
    assert criterion.class_weights(thp(num_classes=4), counts) is None
    given = thp(num_classes=4, class_weights=(1, 2, 3, 4))
    assert criterion.class_weights(given, counts) == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ConfigError, match="class 1 has no training images") as info:
        criterion.balanced_weights([3, 0, 2])
    assert "To fix:" in str(info.value)
    with pytest.raises(ConfigError, match="3 weights for 4 classes"):
        criterion.class_weights(thp(num_classes=4, class_weights=(1, 2, 3)), counts)


# ---- layer-wise learning-rate decay and weight decay groups -------------------------------
def _mult_of(groups):
    """Parameter (by id) -> (lr_mult, weight_decay) of its group."""
    return {id(p): (g["lr_mult"], g["weight_decay"]) for g in groups for p in g["params"]}


def test_resnet_groups_learn_at_decay_to_the_stage_depth():
    """ResNet by stage: fc at the rate x head_lr_mult, layer4 x d, layer3 x d^2, ... the
    stem (conv1, bn1) x d^5; no weight decay on norms and biases when asked."""
    from torchvision.models import resnet18

    net = resnet18(num_classes=8)
    hp = thp(layer_decay=0.5, head_lr_mult=10.0, wd=0.05, wd_norm_bias=False)
    groups = optim.param_groups(net, hp)
    mult = _mult_of(groups)
    depth = {"fc": 0, "layer4": 1, "layer3": 2, "layer2": 3, "layer1": 4, "conv1": 5, "bn1": 5}
    for name, p in net.named_parameters():
        d = depth[name.split(".")[0]]
        want_lr = 0.5**d * (10.0 if d == 0 else 1.0)
        norm_or_bias = ".bn" in f".{name}" or "downsample.1" in name or name.endswith("bias")
        assert mult[id(p)] == (pytest.approx(want_lr), 0.0 if norm_or_bias else 0.05), name
    assert sum(len(g["params"]) for g in groups) == len(list(net.parameters()))
    # the step sets each group's rate to the scheduled one x lr_mult
    opt = optim.optimizer(groups, hp)
    for g in opt.param_groups:
        g["lr"] = 0.1 * g["lr_mult"]
    assert sorted({round(g["lr"], 12) for g in opt.param_groups}) == sorted(
        {round(0.1 * 0.5**d, 12) for d in range(1, 6)} | {1.0}
    )


def test_without_the_features_the_groups_are_as_before():
    from torchvision.models import resnet18

    from finetune.train.engines.torch import network

    net = resnet18(num_classes=8)
    hp = thp(head_lr_mult=10.0)
    old, new = network.param_groups(net, hp), optim.param_groups(net, hp)
    assert [[id(p) for p in g["params"]] for g in old] == [
        [id(p) for p in g["params"]] for g in new
    ]


def test_vit_convnext_and_swin_depths_by_block():
    """Small instances of torchvision's ViT, ConvNeXt and Swin: the depth (from the head) of
    each parameter is the block's, counted by hand from the architecture."""
    from torchvision.models import convnext, swin_transformer, vision_transformer

    vit = vision_transformer.VisionTransformer(32, 16, 2, 2, 8, 16, num_classes=3)
    d = optim.layer_depths(vit)
    # ids: embeddings 0, two blocks 1-2, final norm 3, head 4
    assert d["conv_proj.weight"] == d["class_token"] == d["encoder.pos_embedding"] == 4
    assert d["encoder.layers.encoder_layer_0.ln_1.weight"] == 3
    assert d["encoder.layers.encoder_layer_1.mlp.0.weight"] == 2
    assert d["encoder.ln.weight"] == 1 and d["heads.head.weight"] == 0

    cfg = convnext.CNBlockConfig
    cn = convnext.ConvNeXt([cfg(8, 16, 2), cfg(16, None, 1)], num_classes=3)
    d = optim.layer_depths(cn)
    # stem 0, stage blocks 1 and 2, downsample 3, block 4, classifier (norm + linear) 5
    assert d["features.0.0.weight"] == 5
    assert d["features.1.0.block.0.weight"] == 4 and d["features.1.1.block.0.weight"] == 3
    assert d["features.2.0.weight"] == 2 and d["features.3.0.block.0.weight"] == 1
    assert d["classifier.0.weight"] == d["classifier.2.weight"] == 0

    sw = swin_transformer.SwinTransformer([4, 4], 8, [1, 1], [1, 1], [2, 2], num_classes=3)
    d = optim.layer_depths(sw)
    # patch embedding 0, block 1, patch merging 2, block 3, final norm 4, head 5
    assert d["features.0.0.weight"] == 5 and d["features.1.0.norm1.weight"] == 4
    assert d["features.2.reduction.weight"] == 3 and d["features.3.0.attn.qkv.weight"] == 2
    assert d["norm.weight"] == 1 and d["head.weight"] == 0
    groups = optim.param_groups(sw, thp(layer_decay=0.7))
    assert sorted({round(g["lr_mult"], 9) for g in groups}) == [
        round(0.7**i, 9) for i in (5, 4, 3, 2, 1, 0)
    ]


def test_an_unknown_shape_refuses_layer_decay():
    net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 2))
    with pytest.raises(ConfigError, match="layer_decay") as info:
        optim.param_groups(net, thp(layer_decay=0.5))
    assert "To fix:" in str(info.value)


def test_adamw_takes_betas_and_the_groups_weight_decay():
    net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LayerNorm(3))
    hp = thp(optimizer="adamw", betas=(0.8, 0.95), wd=0.05, wd_norm_bias=False)
    opt = optim.optimizer(optim.param_groups(net, hp), hp)
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["betas"] == (0.8, 0.95)
    decays = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert decays[id(net[0].weight)] == 0.05
    assert decays[id(net[0].bias)] == decays[id(net[1].weight)] == decays[id(net[1].bias)] == 0.0


# ---- the weights' average -------------------------------------------------------------------
def test_ema_after_n_steps_equals_the_hand_recursion():
    """Warmup steps copy the weights, then avg = d * avg + (1 - d) * w; float buffers are
    averaged, integer ones copied; save and load give back the same average."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    decay, warmup = 0.9, 2
    avg = ema.Ema(net, decay, warmup)
    hand = [v.double().clone() for v in net.state_dict().values()]
    for step in range(1, 7):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(torch.randn_like(p))
        net.train()(torch.randn(4, 2))  # BatchNorm's running statistics move too
        avg.update(net)
        now = list(net.state_dict().values())
        for i, (h, w) in enumerate(zip(hand, now, strict=True)):
            if step <= warmup or not w.is_floating_point():
                hand[i] = w.double().clone()
            else:
                hand[i] = decay * h + (1 - decay) * w.double()
    got = list(avg.module.state_dict().values())
    for h, g in zip(hand, got, strict=True):
        assert torch.allclose(g.double(), h, atol=1e-6), (g, h)
    assert avg.updates == 6
    assert got[-1].item() == 6  # num_batches_tracked: copied, an integer

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        avg.save(Path(folder))
        back = ema.Ema(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2)), decay)
        back.load(Path(folder) / ema.EMA_FILE)
    assert back.updates == 6
    saved, loaded = avg.module.state_dict(), back.module.state_dict()
    for a, b in zip(saved.values(), loaded.values(), strict=True):
        assert torch.equal(a, b)


# ---- gradient clipping ----------------------------------------------------------------------
@pytest.mark.parametrize("fp16", [False, True], ids=["no-scaler", "fp16-scaler"])
def test_clipping_yields_the_hand_computed_norm(fp16):
    """Gradients (3, 0) and (4,): total norm 5, clipped to 1 -- each divided by 5. With the
    fp16 scaler the gradients are unscaled first, so the norm is the true one."""
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    # the engine's own optimizer: fused SGD, which takes the scaler's state itself
    hp = thp(optimizer="sgd", momentum=0.0, wd=0.0)
    opt = optim.optimizer([{"params": [a, b], "lr_mult": 1.0}], hp)
    assert isinstance(opt, torch.optim.SGD) and opt.defaults["fused"] is True
    opt.param_groups[0]["lr"] = 1.0
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, enabled=fp16)
    loss = (a * torch.tensor([3.0, 0.0])).sum() + (b * 4.0).sum()
    scaler.scale(loss).backward()
    if fp16:
        assert a.grad.tolist() == [3072.0, 0.0]  # scaled
    norm = optim.clip(scaler, opt, 1.0)
    assert norm.item() == pytest.approx(5.0)
    assert a.grad.tolist() == pytest.approx([0.6, 0.0], rel=1e-5)
    assert b.grad.tolist() == pytest.approx([0.8], rel=1e-5)
    scaler.step(opt)  # (the step after unscale_ does not unscale twice)
    assert b.tolist() == pytest.approx([-0.8], rel=1e-5)
    assert optim.clip(scaler, opt, 0.0) is None  # 0: off


# ---- augmentation presets ---------------------------------------------------------------------
def test_presets_are_torchvisions_own_seeded_per_image_leaving_the_global_generator():
    """Each image is the torchvision transform's output under its own seed; two images with
    the same seed come out the same; the process's generator is left where it was."""
    from torchvision.transforms import InterpolationMode, v2

    g = torch.Generator().manual_seed(3)
    pixels = torch.randint(0, 256, (3, 3, 16, 16), generator=g).to(torch.float32)
    pixels[2] = pixels[0]
    aug = augment.Augment("rand_augment", num_ops=2, magnitude=12, erasing=0.0)
    seeds = [augment.image_seed(0, 1, 2, j) for j in (0, 1, 0)]
    torch.manual_seed(123)
    before = torch.get_rng_state()
    out = aug.batch(pixels, seeds, lambda p: p / 255.0)
    assert torch.equal(torch.get_rng_state(), before)
    ra = v2.RandAugment(2, 12, interpolation=InterpolationMode.BILINEAR)
    for i in range(3):
        torch.manual_seed(seeds[i])
        want = ra(pixels[i].to(torch.uint8)).to(torch.float32) / 255.0
        assert torch.equal(out[i], want), i
    assert torch.equal(out[0], out[2]) and not torch.equal(out[0], out[1])


def test_random_erasing_erases_to_zero_with_its_probability():
    aug = augment.Augment("none", erasing=1.0)
    x = torch.ones(4, 3, 16, 16)
    out = aug.batch(x * 255, [augment.image_seed(0, j) for j in range(4)], lambda p: p / 255)
    for image in out:
        erased = image == 0
        assert 0 < int(erased.sum()) < image.numel()  # a box, in every channel alike
        assert torch.equal(erased[0], erased[1])
    assert augment.from_hparams(thp()) is None
    assert augment.from_hparams(thp(random_erasing=0.25)).erasing == 0.25


# ---- the recipe keys ----------------------------------------------------------------------
def test_mxnet_refuses_the_features_in_the_recipe_and_the_hyperparameters():
    from finetune.recipes.loading import load_recipe

    with pytest.raises(ConfigError) as info:
        load_recipe("smoke-resnet18", ["augment.mixup_alpha=0.2", "ema.decay=0.99",
                                       "optimizer.layer_decay=0.7"])  # fmt: skip
    text = str(info.value)
    assert "the mxnet engine does not implement augment.mixup_alpha, ema.decay, " in text
    assert "optimizer.layer_decay" in text and "set engine: torch" in text and "To fix:" in text
    with pytest.raises(ConfigError, match=r"optimizer\.name=adamw"):
        load_recipe("smoke-resnet18", ["optimizer.name=adamw"])
    raw = hparams(engine="mxnet").to_strings()
    raw["mixup_alpha"] = "0.2"
    with pytest.raises(ConfigError, match="mixup_alpha need the torch engine"):
        TrainHyperparameters.from_strings(raw)


def test_recipe_keys_are_validated_with_a_did_you_mean():
    from finetune.recipes.loading import load_recipe

    cases = {
        "augment.polcy=x": 'Did you mean "augment.policy"?',
        "augment.policy=trivial": "augment.policy",
        "loss.class_weights=balancd": 'Did you mean "balanced"?',
        "loss.class_weights=[1, -2]": "positive finite",
        "ema.decay=1.5": "ema.decay",
        "optimizer.betas=[0.9, 1.2]": "betas must lie in [0, 1)",
        "augment.rand_magnitude=31": "augment.rand_magnitude",
        "loss.label_smoothing=1": "loss.label_smoothing",
    }
    for override, said in cases.items():
        with pytest.raises(ConfigError) as info:
            load_recipe("smoke-resnet18-torch", [override])
        assert said in str(info.value) and "To fix:" in str(info.value), override


def test_the_plan_carries_the_features_and_checks_the_class_weights(tiny_dataset):
    from finetune.plan.build import build_plan

    plan = build_plan("smoke-resnet18-torch", tiny_dataset, overrides=[
        "optimizer.name=adamw", "augment.policy=trivial_augment_wide", "augment.mixup_alpha=0.2",
        "loss.class_weights=balanced", "ema.decay=0.999", "ema.warmup=10",
        "optimizer.layer_decay=0.75", "optimizer.clip_grad_norm=1.0"])  # fmt: skip
    hp = plan.hyperparameters
    assert (hp.optimizer, hp.auto_augment, hp.mixup_alpha, hp.class_weights) == (
        "adamw", "trivial_augment_wide", 0.2, "balanced")  # fmt: skip
    assert (hp.ema_decay, hp.ema_warmup_steps, hp.layer_decay, hp.clip_grad_norm) == (
        0.999, 10, 0.75, 1.0)  # fmt: skip
    assert hp.wd_norm_bias is False  # AdamW: no decay on norms and biases (timm)
    assert TrainHyperparameters.from_strings(hp.to_strings()) == hp
    from finetune.cli._plan_view import summary_rows

    rows = dict(summary_rows(plan))  # what --dry-run shows
    assert rows["features"].startswith("augment.mixup_alpha=0.2, augment.policy=trivial_")
    assert "ema.decay=0.999, ema.warmup=10" in rows["features"]
    assert len(hp.to_strings()) <= 100  # SageMaker's limit on hyperparameters
    sgd_plan = build_plan("smoke-resnet18-torch", tiny_dataset)
    sgd = sgd_plan.hyperparameters
    assert sgd.wd_norm_bias is True and sgd.ema_decay == 0.0  # as before
    assert "features" not in dict(summary_rows(sgd_plan))
    with pytest.raises(ConfigError, match="3 weights, the dataset has 8 classes"):
        build_plan("smoke-resnet18-torch", tiny_dataset, overrides=["class_weights=[1, 2, 3]"])


# ---- the presets on both data paths: by position ------------------------------------------
@pytest.mark.parametrize("path", ["resident", "stream"])
def test_augmented_batches_resume_by_position_and_split_across_processes(tiny_dataset, path):
    """With TrivialAugment and random erasing on, the batches from position 3 on are the
    uninterrupted epoch's; (resident) two processes' slices are one process's batch."""
    from finetune.train import dataset
    from finetune.train.engines.torch import batches, ddp, hardware
    from finetune.train.preprocess import Preprocessing

    hp = thp(auto_augment="trivial_augment_wide", random_erasing=0.5, data_path=path)
    files = dataset.resolve(tiny_dataset, tiny_dataset, hp)
    contract, cpu = Preprocessing.from_hparams(hp), torch.device("cpu")
    kind = batches.ResidentBatches if path == "resident" else batches.StreamBatches
    layout = hardware.memory_format(cpu, model=hp.model)  # the run's, as the session gives it
    one = kind(files, contract, cpu, hp, ddp.Group(), 4, layout)
    full = list(one.batches(1))
    plain = list(kind(files, contract, cpu, thp(data_path=path), ddp.Group(), 4, layout).batches(1))
    assert not torch.equal(full[0][0], plain[0][0])  # the presets changed the images
    assert torch.equal(full[0][1], plain[0][1])  # (same records, same order)
    for (x, y), (x2, y2) in zip(one.batches(1, 3), full[3:], strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2)
    if path == "resident":
        for rank in (0, 1):
            part = kind(files, contract, cpu, hp, ddp.Group(rank, 2, rank, 2), 4, layout)
            for (x, _), (x1, _) in zip(part.batches(1), full, strict=True):
                assert torch.equal(x, x1[rank * 4 : (rank + 1) * 4])


def test_the_commented_example_in_the_bundled_recipe_is_a_valid_recipe():
    """caltech256-resnet50-torch's commented options, uncommented, validate as a recipe."""
    import yaml

    from finetune.recipes.loading import BUILTIN_DIR, read_mapping
    from finetune.recipes.schema import validate_recipe

    path = BUILTIN_DIR / "caltech256-resnet50-torch.yaml"
    lines = path.read_text().splitlines()
    start = lines.index("# augment:")
    block = [line[2:] for line in lines[start:] if line.startswith("#   ") or line[2:3] != " "]
    example = yaml.safe_load("\n".join(line for line in block if not line.startswith("(")))
    data = read_mapping(path)
    data.update(example)
    data["optimizer"].update(name="adamw", lr_per_device=0.0005, wd=0.05, layer_decay=0.75,
                             clip_grad_norm=1.0, betas=[0.9, 0.999])  # fmt: skip
    recipe = validate_recipe(data, str(path))
    assert recipe.augment.mixup_alpha == 0.2 and recipe.ema.decay == 0.9998
    assert recipe.loss.label_smoothing == 0.1 and recipe.augment.policy == "trivial_augment_wide"
