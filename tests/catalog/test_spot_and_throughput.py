"""Spot prices (estimate by default, EC2's when asked) and throughput references."""

import logging
from datetime import date

import pytest

from finetune.catalog import prices, spot
from finetune.estimate import run_history
from finetune.estimate.run_history import Measurement

G5 = prices.Price("g5.xlarge", "us-east-1", "ec2", 1.0, date(2025, 5, 31), "test")


def test_spot_estimate_is_the_snapshot_median_labelled_as_a_snapshot():
    s = spot.estimated(G5)
    # snapshot g5.xlarge us-east-1 zone prices 0.507, 0.4591, 0.4886, 0.467, 0.4905 -> 0.4886
    assert s.usd_per_hour == pytest.approx(0.4886)
    assert s.estimate is True and s.as_of is None
    assert "snapshot spot: median of 5 zone price(s) in us-east-1" in s.source
    assert "catalog snapshot (2025 or later)" in s.source


def test_without_a_snapshot_spot_price_the_default_discount_is_a_labelled_estimate():
    p5 = prices.Price("p5.48xlarge", "eu-west-1", "ec2", 10.0, date(2026, 1, 5), "test")
    s = spot.estimated(p5)  # the snapshot has no p5 rows in eu-west-1
    assert s.usd_per_hour == pytest.approx(4.0)
    assert s.estimate is True and s.source.startswith("estimate:") and "60%" in s.source


def test_live_spot_prices_come_from_ec2_and_sagemaker_keeps_the_estimate(aws_env):
    """moto's EC2 answers DescribeSpotPriceHistory with a placeholder price in every zone."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        sm = prices.Price("g5.xlarge", "us-east-1", "sagemaker", 1.4, date(2025, 5, 31), "test")
        out = spot.spot_prices(
            [G5, sm],
            live=True,
            client_for=lambda region: boto3.client("ec2", region_name=region, endpoint_url=url),
        )
    finally:
        server.stop()
    live = out[G5.key]
    assert live.estimate is False and live.zone.startswith("us-east-1")
    assert live.source.startswith("EC2 spot price history")
    assert live.usd_per_hour < G5.usd_per_hour
    assert out[sm.key].estimate is True


def test_measured_history_wins_for_its_cell():
    """The reference table is gone (calibration rows feed the model, tests/catalog/
    test_perf_model.py); what stays here: the ledger's runs of the same cell."""
    history = [
        Measurement("resnet50_v1", "V100", 1, 300.0, "r1"),
        Measurement("resnet50_v1", "V100", 1, 320.0, "r2"),
        Measurement("resnet50_v1", "V100", 1, 310.0, "r3"),
        Measurement("resnet152_v1", "V100", 1, 120.0, "other-net"),
        Measurement("resnet50_v1", "K80", 1, 50.0, "other-gpu"),
    ]
    same = run_history.from_history("resnet50_v1b", "V100", 1, history)
    assert same.exact and same.images_per_sec == 310.0 and (same.low, same.high) == (300, 320)
    assert "r1, r2, r3" in same.describe()
    scaled = run_history.from_history("resnet50_v1", "V100", 4, history)
    assert not scaled.exact and scaled.images_per_sec == 310.0 and scaled.devices == 1


def test_unknown_networks_and_names():
    vgg = [Measurement("vgg16", "V100", 1, 9.0, "v")]  # not in the FLOP table: by exact name
    assert run_history.from_history("vgg19", "V100", 1, vgg) is None
    assert run_history.from_history("vgg16", "V100", 1, vgg).images_per_sec == 9.0
    assert run_history.network_key("imagenet11k-resnet-152") == "resnet152"
    assert run_history.network_key("resnet50_v1") == "resnet50"
    assert run_history.network_key("vgg16") is None
