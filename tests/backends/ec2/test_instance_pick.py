"""`launch --instance cheapest|fastest` as a user types it: the instance, hosts, market and
backend come from the same plan as `finetune plan`, and --dry-run says which and why."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from tests.ranking.planhand import on_demand, torch_runnable

from .conftest import REGION


def _launch(dataset, *more):
    args = ["launch", "smoke-resnet18-torch", "--dataset", str(dataset), *more]
    return CliRunner().invoke(app, args)


def test_cheapest_dry_run_picks_the_lowest_price_and_says_why(ec2_aws, tiny_dataset):
    # 80 images of 32 px: every candidate takes the 300 s start-up plus well under a second
    # of training, so the cheapest on-demand one is the lowest hourly price (sagemaker's
    # ml.* prices are the EC2 price x 1.25, never lower)
    prices = {name: on_demand(name, REGION) for name in torch_runnable(REGION)}
    want = min(prices, key=prices.get)
    assert sorted(prices.values())[0] < sorted(prices.values())[1]  # one clear winner
    res = _launch(tiny_dataset, "--instance", "cheapest", "--deadline", "1h", "--dry-run")
    assert res.exit_code == 0, res.output
    assert f"--instance cheapest: 1x {want} (" in res.output
    assert "on-demand on ec2 in us-east-1 -- the cheapest done within 1 h" in res.output
    # the plan that would launch (labels are padded to the longest one)
    assert re.search(rf"resources +ec2 {re.escape(want)}: 1 host\(s\)", res.output), res.output
    assert "EC2 instances:" in res.output and f"1 x {want} (on demand)" in res.output
    assert ec2_aws.sent("RunInstances") == []


def test_the_pick_matches_finetune_plan_and_spot_picks_spot(ec2_aws, tiny_dataset):
    plan = CliRunner().invoke(app, ["plan", "smoke-resnet18-torch", "--dataset",
                                    str(tiny_dataset), "--spot", "--backend", "ec2",
                                    "--format", "json"])  # fmt: skip
    assert plan.exit_code == 0, plan.output
    best = json.loads(plan.stdout)["fastest"]
    res = _launch(tiny_dataset, "--instance", "fastest", "--spot", "--backend", "ec2",
                  "--dry-run", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert f"--instance fastest: {best['hosts']}x {best['instance']} (" in res.stderr
    assert f"spot on ec2 in {REGION}" in res.stderr
    shown = json.loads(res.stdout)  # the plan as it would launch
    assert shown["resources"]["instance_type"] == best["instance"]
    assert shown["resources"]["hosts"] == best["hosts"] and shown["resources"]["spot"] is True
    # one estimator: the launch's estimate is the plan row's, to the cent and the second
    assert shown["estimate"]["eur"] == best["eur"]
    assert shown["estimate"]["seconds"] == pytest.approx(best["minutes"] * 60, rel=1e-12)


def test_deadline_without_a_pick_and_an_impossible_budget_are_refused(ec2_aws, tiny_dataset):
    res = _launch(tiny_dataset, "--backend", "ec2", "--instance", "g5.xlarge",
                  "--deadline", "1h", "--dry-run")  # fmt: skip
    assert res.exit_code != 0
    assert "--deadline only applies with --instance cheapest" in res.output
    assert "To fix:" in res.output
    res = _launch(tiny_dataset, "--instance", "fastest", "--budget", "0.001", "--dry-run")
    assert res.exit_code != 0
    assert "no instance costs at most --budget 0.001 EUR: the cheapest" in res.output
    assert "To fix: raise --budget to" in res.output and "Traceback" not in res.output
