"""`launch --backend sagemaker --max-eur` as a user types it: zero is a cap (nothing can
run for it), never "no cap"; a negative or non-finite cap is refused; a cap too small for the
shortest job says so with the smallest cap that works -- checked by launching with it."""

from __future__ import annotations

import math
import re

import pytest
from typer.testing import CliRunner

from finetune.cli import app

SMOKE = ["launch", "smoke-resnet18", "--backend", "sagemaker", "--instance", "p3.2xlarge"]


def _launch(dataset, *more):
    return CliRunner().invoke(app, [*SMOKE, "--dataset", str(dataset), *more])


@pytest.mark.parametrize(
    ("cap", "message"),
    [
        ("0", "--max-eur 0 caps spending at nothing"),
        ("0.0", "--max-eur 0 caps spending at nothing"),
        ("-1", "--max-eur -1 is negative"),
        ("nan", "not a finite number"),
        ("inf", "not a finite number"),
    ],
)
def test_a_zero_negative_or_endless_cap_is_refused(cloud, tiny_dataset, cap, message):
    res = _launch(tiny_dataset, "--max-eur", cap, "--dry-run")
    assert res.exit_code == 2, res.output
    assert message in res.output and "To fix:" in res.output
    assert "max runtime" not in res.output  # refused before any plan is shown as valid
    res = _launch(tiny_dataset, "--max-eur", cap, "--detach")  # the real launch agrees
    assert res.exit_code == 2 and message in res.output
    assert cloud.requests("CreateTrainingJob") == []


def _minute_costs_eur() -> float:
    """What 60 s of one ml.p3.2xlarge costs, from the catalog's price and the ECB rate."""
    from finetune.catalog import fx, prices

    usd = prices.price("p3.2xlarge", "eu-west-1", "sagemaker").usd_per_hour
    return usd * 60 / 3600 / fx.eur_rate().usd_per_eur


@pytest.mark.parametrize("runtime", [[], ["--max-runtime", "1h"]])
@pytest.mark.parametrize("cap", ["0.001", "0.05"])
def test_a_cap_below_one_minute_names_the_smallest_cap_that_works(
    cloud, tiny_dataset, cap, runtime
):
    res = _launch(tiny_dataset, "--max-eur", cap, *runtime, "--dry-run")
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert "0 minutes" not in out  # the old advice: lower --max-runtime to 0 minutes or less
    assert f"--max-eur {cap} pays for" in out and "a job needs at least 60 s" in out
    least = float(re.search(r"raise --max-eur to ([\d.]+) or more", out)[1])
    assert least == math.ceil(_minute_costs_eur() * 100) / 100
    res = _launch(tiny_dataset, "--max-eur", f"{least:.2f}", "--dry-run")
    assert res.exit_code == 0, res.output  # the cap it offers is enough ...
    assert re.search(r"max runtime\s+[\d.]+ h \((\d+) s\)", res.output)
    res = _launch(tiny_dataset, "--max-eur", f"{least - 0.01:.2f}", "--dry-run")
    assert res.exit_code == 2 and "a job needs at least 60 s" in res.output  # ... and the least
