"""The pre-launch estimate from the bundled catalog: the reference workload on p2.8xlarge."""

import pytest
from runfacts import make_run

from finetune.catalog.throughput import Measurement
from finetune.errors import DataError, UsageError
from finetune.report.estimate import estimate_run, measurements

CALTECH = dict(model="imagenet11k-resnet-152", images_per_epoch=257 * 60, epochs=6)


def test_reference_workload_on_p2_8xlarge():
    est = estimate_run(
        instance_type="p2.8xlarge", region="us-east-1", overhead_seconds=0, **CALTECH
    )
    # 15,420 images x 6 epochs / 150 img/s = 616.8 s -> 617 s billed;
    # 617 x 7.20 USD / 3600 / 1.1720 USD per EUR = 1.0529 EUR (bundled ECB rate of 2025-06-30)
    assert est["seconds"] == 617
    assert est["eur"] == pytest.approx(617 * 7.20 / 3600 / 1.172)
    assert est["eur"] < 2.5  # the published "under 2.5 EUR per run"
    assert "BEEVA" in est["throughput_source"]
    assert est["price_source"] == "AWS list price (issue baseline)"
    assert est["rate_date"] == "2025-06-30"
    assert any("retired by AWS" in line for line in est["summary"])


def test_spot_and_measured_history():
    history = [Measurement("imagenet11k-resnet-152", "K80", 8, 160.0, "run-7")]
    est = estimate_run(
        instance_type="p2.8xlarge", region="us-east-1", use_spot=True, history=history, **CALTECH
    )
    assert est["images_per_sec"] == 160.0 and "run-7" in est["throughput_source"]
    assert est["hourly_usd"] == pytest.approx(7.20 * 0.4) and est["spot_estimate"] is True
    assert "spot: estimated 60% below on-demand" in est["summary"][0]


def test_unknown_throughput_leaves_time_and_euros_open():
    est = estimate_run(instance_type="g6.xlarge", region="us-east-1", **CALTECH)
    assert est["eur"] is None and est["seconds"] is None
    assert "no throughput figure" in est["summary"][1]


def test_bad_instance_or_region():
    with pytest.raises(UsageError, match="Did you mean"):
        estimate_run(instance_type="p2.8xlarg", region="us-east-1", **CALTECH)
    with pytest.raises(DataError, match="finetune prices refresh --region ap-south-1"):
        estimate_run(instance_type="p2.8xlarge", region="ap-south-1", **CALTECH)


def test_ledger_runs_become_throughput_history():
    runs = [
        make_run(
            run_id="a", instance_type="p2.8xlarge", gpus_per_instance=8, steady_images_per_sec=140
        ),
        make_run(run_id="no-metrics"),
    ]
    assert measurements(runs) == [Measurement("imagenet11k-resnet-152", "K80", 8, 140, "a")]
    est = estimate_run(
        instance_type="p2.8xlarge", region="us-east-1", history=measurements(runs), **CALTECH
    )
    assert est["images_per_sec"] == 140 and "run(s) a" in est["throughput_source"]
