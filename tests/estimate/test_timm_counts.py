"""A timm model's estimate: its engine builds it on the meta device (no weights, nothing
fetched), one training step is counted and kept in the cache's perf/counted.csv, and the next
estimate reads the kept row; a network no engine can build still has no figure."""

from __future__ import annotations

import csv

import pytest

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

from finetune.engines.torch import TORCH  # noqa: E402
from finetune.estimate.estimator import estimate  # noqa: E402
from finetune.estimate.perf import ondemand  # noqa: E402
from finetune.estimate.request import EstimateRequest, Workload  # noqa: E402


def _estimate(model: str):
    work = Workload(model, engine=TORCH, image_size=32, batch_per_device=16)
    return estimate(EstimateRequest(work=work, instance_type="g6.xlarge", region="us-east-1",
                                    images_per_epoch=1000, epochs=1))  # fmt: skip


def test_a_timm_model_is_counted_on_the_meta_device_once():
    est = _estimate("timm/test_vit")
    assert est.seconds is not None and est.eur is not None, est.summary
    assert "prediction" in est.throughput_source
    with open(ondemand.path(), newline="") as f:
        (row,) = list(csv.DictReader(f))
    net = timm.create_model("test_vit", img_size=32)  # ImageNet's head, as the bundled rows
    assert (row["Network"], row["ImageSize"]) == ("timm/test_vit", "32")
    assert int(row["Parameters"]) == sum(p.numel() for p in net.parameters())
    assert float(row["MatmulGflops"]) > 0 and int(row["Kernels"]) > 0
    kept = ondemand.path().stat().st_mtime_ns
    again = _estimate("timm/test_vit")
    assert again.seconds == est.seconds and ondemand.path().stat().st_mtime_ns == kept


def test_a_network_without_bundled_counts_or_a_meta_build_has_no_figure():
    est = _estimate("vgg16")  # a torchvision name outside the engine's table
    assert est.seconds is None and "no throughput figure" in est.summary[1]
    assert not ondemand.path().exists()
