"""Oracle tests: hand-computed euros, speedups and efficiencies for known runs.

Rate 1.2 USD per EUR throughout, so USD/1.2 is easy to check by hand.
"""

from datetime import date

import pytest

from finetune.catalog.fx import Rate
from finetune.errors import DataError, UsageError
from finetune.estimate import cost, money
from finetune.estimate.duration import duration, training_seconds
from finetune.estimate.request import EstimateRequest, Workload
from finetune.estimate.throughput import Throughput
from finetune.report import speedup
from tests.report.runfacts import epochs, make_run


def test_sagemaker_spot_savings_and_eur_per_epoch():
    assert cost.sagemaker_spot_savings(1200, 3000) == pytest.approx(0.6)
    assert cost.sagemaker_spot_savings(100, 0) == 0.0
    assert cost.eur_per_epoch(2.55, 6) == pytest.approx(0.425)
    assert cost.eur_per_epoch(2.55, 0) is None


def test_estimate_from_throughput():
    # 15,420 images x 6 epochs at 150 img/s = 616.8 s, + 60 s start-up = 676.8 -> 677 s billed;
    # p2.8xlarge 7.20 USD/h: 677 x 7.2 / 3600 / 1.2 = 1.12833 EUR
    request = EstimateRequest(Workload("resnet152"), "p2.8xlarge", "us-east-1", 15420, 6,
                              overhead_seconds=60)  # fmt: skip
    run = duration(request, Throughput(150.0, 120.0, 200.0, ("BEEVA",), measured=True))
    assert training_seconds(15420, 6, 150.0) == pytest.approx(616.8)
    # the band: 15,420 x 6 / 200 + 60 = 522.6 -> 523; / 120 + 60 = 831
    assert (run.seconds, run.fastest, run.slowest) == (677, 523, 831)
    charge = money.Charge(money.EC2, "p2.8xlarge", 1, run.seconds, 7.20)
    est = money.euros([charge], Rate(1.2, date(2025, 6, 30), "test"), estimate=True)
    assert est.billed_seconds == 677
    assert est.eur == pytest.approx(1.128333, rel=1e-6) and est.estimate
    with pytest.raises(DataError, match="throughput of 0"):
        training_seconds(100, 1, 0)


def test_beeva_k80_figures_give_94_percent_efficiency():
    s = speedup.speedup(150.0, 20.0)  # 8 K80: ~150 img/s; 1 K80: ~20 img/s (ResNet-152)
    assert s == pytest.approx(7.5)
    assert speedup.efficiency(s, 8) == pytest.approx(0.9375)


def test_sweep_of_1_4_8_gpus():
    runs = [
        make_run(run_id="g1", steady_images_per_sec=300.0),
        make_run(
            run_id="g4",
            instance_type="p3.8xlarge",
            devices_per_host=4,
            steady_images_per_sec=1140.0,
            billable_seconds=1000,
            hourly_usd=12.24,
        ),
        make_run(
            run_id="g8",
            instance_type="p3.16xlarge",
            devices_per_host=8,
            steady_images_per_sec=2160.0,
            billable_seconds=600,
            hourly_usd=24.48,
        ),
        make_run(  # two instances of 4 GPUs = 8 GPUs, 2000 img/s
            run_id="g2x4",
            instance_type="p3.8xlarge",
            hosts=2,
            devices_per_host=4,
            steady_images_per_sec=2000.0,
            billable_seconds=500,
            hourly_usd=12.24,
        ),
    ]
    result = {s.run_id: s for s in speedup.scaling(runs)}
    # the 1-GPU run is the baseline, not a scaling measurement: no "1.00x 100 %" for it
    assert result["g1"].speedup is None and result["g1"].efficiency is None
    assert result["g4"].speedup == pytest.approx(3.8) and result["g4"].efficiency == pytest.approx(
        0.95
    )
    assert result["g8"].speedup == pytest.approx(7.2) and result["g8"].efficiency == pytest.approx(
        0.90
    )
    assert result["g2x4"].efficiency == pytest.approx(2000 / 300 / 8)
    assert result["g8"].baseline_runs == ("g1",)
    euros = [r.money.eur for r in runs]
    assert euros == pytest.approx([2.55, 2.833333, 3.4, 2.833333], rel=1e-6)


def test_baseline_is_per_recipe_dataset_and_gpu_model():
    k80_8 = dict(instance_type="p2.8xlarge", devices_per_host=8, steady_images_per_sec=150.0)
    other_8 = dict(recipe="other", instance_type="p3.16xlarge", devices_per_host=8)
    runs = [
        make_run(run_id="v100-1", steady_images_per_sec=300.0),
        make_run(run_id="k80-8", **k80_8),
        make_run(run_id="k80-1", instance_type="p2.xlarge", steady_images_per_sec=20.0),
        make_run(run_id="other-8", steady_images_per_sec=2000.0, **other_8),
    ]
    result = {s.run_id: s for s in speedup.scaling(runs)}
    assert result["k80-8"].efficiency == pytest.approx(0.9375)  # against k80-1, not v100-1
    assert result["other-8"].speedup is None  # no 1-GPU run of that recipe


def test_throughput_falls_back_to_the_median_epoch():
    run = make_run(epochs=epochs([10, 10, 10], [0.5, 0.6, 0.7], images_per_sec=90.0))
    assert run.images_per_sec == 90.0 and run.best_val_acc == 0.7
    assert make_run().images_per_sec is None  # no metrics at all


def test_time_and_euros_to_a_target_accuracy():
    run = make_run(
        billable_seconds=3600, epochs=epochs([100, 100, 100, 100], [0.5, 0.8, 0.87, 0.88])
    )
    assert speedup.time_to_accuracy(run.epochs, 0.865) == 300.0
    # 2.55 EUR for the run, 300 of 400 training seconds spent reaching 86.5 %: 1.9125 EUR
    assert speedup.eur_to_accuracy(run, 0.865) == pytest.approx(1.9125)
    assert speedup.time_to_accuracy(run.epochs, 0.95) is None
    assert speedup.eur_to_accuracy(make_run(), 0.5) is None  # a run without metrics
    with pytest.raises(UsageError, match="fraction"):
        speedup.time_to_accuracy(run.epochs, 86.5)


def test_efficiency_only_for_n_above_1_against_a_different_1_device_run():
    # two single-device runs used to read 97 % and 103 % (each against a median including
    # itself): a 1-device run has no efficiency, and one run alone has none either
    pair = [
        make_run(run_id="a", steady_images_per_sec=291.0),
        make_run(run_id="b", steady_images_per_sec=309.0),
    ]
    assert [(s.speedup, s.efficiency) for s in speedup.scaling(pair)] == [(None, None)] * 2
    assert (
        speedup.scaling([make_run(run_id="alone", steady_images_per_sec=300.0)])[0].speedup is None
    )
    # a run reported alone keeps its speedup when a baseline exists elsewhere (the ledger)
    g4 = make_run(
        run_id="g4", instance_type="p3.8xlarge", devices_per_host=4, steady_images_per_sec=1140.0
    )
    (alone,) = speedup.scaling([g4], pool=pair)
    assert alone.speedup == pytest.approx(1140 / 300) and alone.baseline_runs == ("a", "b")


def test_baseline_needs_the_same_engine_batch_and_image_size():
    one = make_run(run_id="one", engine="mxnet", batch_per_device=16, steady_images_per_sec=300.0)
    four = dict(instance_type="p3.8xlarge", devices_per_host=4, steady_images_per_sec=1140.0)
    runs = [
        one,
        make_run(run_id="same", engine="mxnet", batch_per_device=16, **four),
        make_run(run_id="torch", engine="torch", batch_per_device=16, **four),
        make_run(run_id="b32", engine="mxnet", batch_per_device=32, **four),
    ]
    result = {s.run_id: s for s in speedup.scaling(runs)}
    assert result["same"].efficiency == pytest.approx(0.95)
    assert result["torch"].speedup is None and result["b32"].speedup is None
