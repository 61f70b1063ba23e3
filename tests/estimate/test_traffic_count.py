"""The byte and FLOP counts the roofline charges, checked against counts made another way:
a small convolution/linear network counted here by hand from its shapes, and one network
row of the bundled table counted again."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from finetune.estimate.perf import traffic  # noqa: E402
from finetune.train.engines.torch import traffic_count  # noqa: E402

S, F32 = 4, 4  # image side, bytes per fp32 element


def small_net() -> nn.Module:
    """conv 3->8 (3x3, no bias), BatchNorm, ReLU, global pool, linear 8->4 (with bias)."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4),
    )  # fmt: skip


def test_a_small_conv_linear_net_is_counted_as_by_hand():
    """Per image, by hand from the shapes (fp32, 4 x 4 px): the convolution's forward and
    its weight gradient (the image needs no gradient) are one 3x3x3 -> 8 convolution each,
    2 x 8 x 16 x 27 FLOPs; the linear layer's forward, input and weight gradients 2 x 8 x 4
    each. Bytes of the matmul class per image: the convolution reads the image (3 x 16) and
    writes its output (8 x 16), its backward reads the output gradient (8 x 16) and the image;
    the linear layer reads its input (8) and writes its output (4); its two backward matrix
    products each read or write the 8 input values (the loss is a sum: the gradient arriving
    is one value broadcast, read once). Per step: the conv weight (8 x 27) read forward and
    backward and its gradient written, the linear weight (32) and bias (4) read forward, the
    weight read and its gradient written backward, the broadcast gradient twice."""
    step = traffic_count.count(small_net(), S, torch.float32)
    conv = 2 * 8 * S * S * 27
    assert step.matmul_flops == pytest.approx(2 * conv + 3 * 2 * 8 * 4)
    per_image = ((3 + 8) * S * S + (8 + 3) * S * S + (8 + 4) + 8 + 8) * F32
    assert step.matmul_bytes == pytest.approx(per_image)
    conv_w, lin_w = 8 * 27 * F32, 32 * F32
    per_step_matmul = 3 * conv_w + (lin_w + 4 * F32) + 2 * (lin_w + F32)
    assert step.weight_bytes >= per_step_matmul  # and the BatchNorm's per-step tensors
    assert step.kernels >= 10 and step.elementwise_bytes > 0


def test_grouped_convolutions_count_their_groups():
    """A depthwise 3x3 convolution of 16 channels: 2 x 16 x 9 FLOPs per output pixel (one
    input channel each), not torch's flop counter's 16 x 16 x 9 in the backward."""
    net = nn.Sequential(nn.Conv2d(3, 16, 1, bias=False), nn.Conv2d(16, 16, 3, padding=1,
                        groups=16, bias=False))  # fmt: skip
    step = traffic_count.count(net, S, torch.float32)
    pointwise, depthwise = 2 * 16 * S * S * 3, 2 * 16 * S * S * 9
    # forward both; backward: the 1x1's weight gradient, the depthwise's input and weight
    assert step.matmul_flops == pytest.approx(2 * pointwise + 3 * depthwise)


def test_a_bundled_row_is_what_the_counter_counts_again():
    """ResNet-18 at 32 px, fp32 and mixed: the stored row, counted again here."""
    from finetune.train.engines.torch.network import construct

    path = resources.files("finetune.estimate.perf").joinpath(traffic.FILE)
    with path.open(encoding="utf-8") as f:
        rows = {(r["Network"], int(r["ImageSize"]), r["Precision"]): r for r in csv.DictReader(f)}
    for label, dtype in (("fp32", torch.float32), ("mixed", torch.bfloat16)):
        r = rows[("resnet18", 32, label)]
        step = traffic_count.count(construct("resnet18", 1000, 32), 32, dtype)
        assert float(r["MatmulGflops"]) == pytest.approx(step.matmul_flops / 1e9, abs=6e-4)
        assert float(r["MatmulMB"]) == pytest.approx(step.matmul_bytes / 1e6, abs=6e-3)
        assert float(r["ElementwiseMB"]) == pytest.approx(step.elementwise_bytes / 1e6, abs=6e-3)
        assert float(r["WeightsMB"]) == pytest.approx(step.weight_bytes / 1e6, abs=6e-3)
        assert int(r["Kernels"]) == step.kernels
        assert traffic.lookup("resnet18", 32, "bf16" if label == "mixed" else "fp32").kernels == (
            step.kernels
        )  # fmt: skip
