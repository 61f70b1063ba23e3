"""The Pareto front on hand-made points, and the spot estimate's interruption overhead by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from planhand import LATEST_RATE, spot_median

from finetune.estimate.estimator import estimate
from finetune.estimate.request import EstimateRequest, Workload
from finetune.ranking.pareto import front


def test_front_of_hand_made_points():
    points = [
        (10.0, 5.0),  # 0: fastest -> front
        (20.0, 3.0),  # 1: front
        (20.0, 4.0),  # 2: as fast as 1, dearer -> off
        (30.0, 3.0),  # 3: as cheap as 1, slower -> off
        (40.0, 1.0),  # 4: cheapest -> front
        (15.0, 6.0),  # 5: slower and dearer than 0 -> off
        (40.0, 1.0),  # 6: equal to 4: neither beats the other -> front
        (25.0, 2.0),  # 7: front
    ]
    assert front(points) == {0, 1, 4, 6, 7}
    assert front([]) == set()
    assert front([(1.0, 1.0)]) == {0}


def test_a_spot_estimate_adds_half_a_checkpoint_interval_per_expected_interruption():
    """100 epochs of 15,420 images at a measured 100 img/s on 2 x g5.xlarge spot (ec2): the
    stated rate (20 % a month over 730 h, per instance) x hours x hosts interruptions, each
    losing 1,800 s / 2 of work."""
    from finetune.estimate.run_history import Measurement

    hist = [Measurement("resnet50", "A10G", 2, 100.0, "run-9", "torch", 32, 224)]
    request = EstimateRequest(
        Workload("resnet50"), instance_type="g5.xlarge", region="us-east-1",
        images_per_epoch=15_420, epochs=100, hosts=2, spot=True, checkpoint_interval_s=1800,
    )  # fmt: skip
    est = estimate(request, hist)
    work = 15_420 * 100 / 100.0 + 300
    expected = work / 3600 * 2 * 0.20 / 730
    seconds = math.ceil(work + expected * 1800 / 2)
    assert math.ceil(work + expected * 900) > math.ceil(work)  # big enough to change the bill
    assert est.seconds == seconds
    assert est.interruption_seconds == pytest.approx(expected * 900, rel=1e-12)
    assert est.eur == pytest.approx(
        seconds * 2 * spot_median("g5.xlarge", "us-east-1") / 3600 / LATEST_RATE, rel=1e-9
    )
    said = " ".join(est.summary)
    assert "spot interruptions" in said and "Spot Instance Advisor" in said
    assert "checkpoint interval / 2" in said
    on_demand = estimate(replace(request, spot=False), hist)
    assert on_demand.seconds == math.ceil(work) and on_demand.interruption_seconds is None
