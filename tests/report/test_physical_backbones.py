"""The report's training FLOPs per image for the torch engine's other networks: the counted
table's figure (a Wide ResNet-50 is not charged as a ResNet-50)."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from finetune.report.physical import train_gflop_per_image


def _row(network: str, size: int) -> dict:
    with resources.files("finetune.estimate.perf").joinpath("train_flops.csv").open() as f:
        return next(
            r for r in csv.DictReader(f) if (r["Network"], r["ImageSize"]) == (network, str(size))
        )


def test_other_networks_take_the_counted_table():
    assert train_gflop_per_image("resnet50", 224) == pytest.approx(6 * 4.09)  # as before
    wide = _row("wide_resnet50_2", 224)
    assert train_gflop_per_image("wide_resnet50_2", 224) == pytest.approx(
        float(wide["TrainGflops"])
    )
    convnext = _row("convnext_tiny", 224)  # depthwise: the model charges 3 x forward
    assert train_gflop_per_image("convnext_tiny", 224) == pytest.approx(
        float(convnext["ThreeXForwardGflops"])
    )
    assert train_gflop_per_image("not_a_network", 224) is None
