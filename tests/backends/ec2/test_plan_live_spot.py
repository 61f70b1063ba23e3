"""`finetune plan --live-spot`: spot rows at EC2's current spot price, read through the EC2
backend (DescribeSpotPriceHistory against moto), not at the catalog's estimate."""

from __future__ import annotations

import datetime
import json

import boto3
import pytest
from typer.testing import CliRunner

from finetune.cli import app
from tests.ranking.planhand import LATEST_RATE, spot_median

from .conftest import REGION


def test_live_spot_prices_the_spot_rows_at_ec2s_current_price(ec2_aws, tiny_dataset):
    args = ["plan", "smoke-resnet18-torch", "--dataset", str(tiny_dataset), "--spot",
            "--backend", "ec2", "--format", "json"]  # fmt: skip
    res = CliRunner().invoke(app, [*args, "--live-spot"])
    assert res.exit_code == 0, res.output
    asked = ec2_aws.sent("DescribeSpotPriceHistory")
    assert asked and "g5.xlarge" in asked[-1].values()  # InstanceType.N: every runnable type
    # the price moto answers now, read here with boto3 directly: the lowest zone's
    history = boto3.client("ec2", region_name=REGION).describe_spot_price_history(
        InstanceTypes=["g5.xlarge"], ProductDescriptions=["Linux/UNIX"],
        StartTime=datetime.datetime.now(datetime.UTC),
    )["SpotPriceHistory"]  # fmt: skip
    live = min(float(h["SpotPrice"]) for h in history)
    assert live != pytest.approx(spot_median("g5.xlarge", REGION))  # distinguishable
    (row,) = [r for r in json.loads(res.stdout)["rows"] if r["instance"] == "g5.xlarge"
              and r["hosts"] == 1]  # fmt: skip
    assert row["eur"] == pytest.approx(row["minutes"] * 60 * live / 3600 / LATEST_RATE, rel=1e-9)
    # without --live-spot: the snapshot's median, no AWS call
    before = len(ec2_aws.sent("DescribeSpotPriceHistory"))
    res = CliRunner().invoke(app, args)
    (row,) = [r for r in json.loads(res.stdout)["rows"] if r["instance"] == "g5.xlarge"
              and r["hosts"] == 1]  # fmt: skip
    median = spot_median("g5.xlarge", REGION)
    assert row["eur"] == pytest.approx(row["minutes"] * 60 * median / 3600 / LATEST_RATE, rel=1e-9)
    assert len(ec2_aws.sent("DescribeSpotPriceHistory")) == before
