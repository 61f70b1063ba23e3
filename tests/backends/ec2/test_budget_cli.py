"""`launch --backend ec2 --max-eur` and `--max-restarts` as a user types them: a zero is a
value given (never "not given": 0 == False in Python), a cap too small for the shortest run
names the smallest cap that works."""

from __future__ import annotations

import math
import re

import pytest
from typer.testing import CliRunner

from finetune.backends.ec2.state import Ec2State
from finetune.cli import app
from finetune.runs.ledger import open_default

from .conftest import REGION


def _launch(dataset, *more):
    args = ["launch", "smoke-resnet18", "--dataset", str(dataset), "--backend", "ec2"]
    return CliRunner().invoke(app, [*args, "--instance", "g5.xlarge", *more])


@pytest.mark.parametrize(
    ("cap", "message"),
    [("0", "--max-eur 0 caps spending at nothing"), ("-2.5", "--max-eur -2.5 is negative")],
)
def test_a_zero_or_negative_cap_is_refused(ec2_aws, tiny_dataset, cap, message):
    res = _launch(tiny_dataset, "--max-eur", cap, "--dry-run")
    assert res.exit_code == 2 and message in res.output and "To fix:" in res.output
    assert "euro cap" not in res.output  # the old dry run showed "none (--max-eur)"
    res = _launch(tiny_dataset, "--max-eur", cap, "--detach")
    assert res.exit_code == 2 and message in res.output
    assert ec2_aws.sent("RunInstances") == []


def test_a_cap_below_ten_minutes_names_the_smallest_cap_that_works(ec2_aws, tiny_dataset):
    from finetune.catalog import fx, prices

    res = _launch(tiny_dataset, "--max-eur", "0.01", "--dry-run")
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "under 10 minutes" in out, out
    least = float(re.search(r"raise --max-eur to ([\d.]+) or more", out)[1])
    usd = prices.price("g5.xlarge", REGION).usd_per_hour  # on demand, 600 s, one instance
    assert least == math.ceil(usd * 600 / 3600 / fx.eur_rate().usd_per_eur * 100) / 100
    assert _launch(tiny_dataset, "--max-eur", f"{least:.2f}", "--dry-run").exit_code == 0
    res = _launch(tiny_dataset, "--max-eur", f"{least - 0.01:.2f}", "--dry-run")
    assert res.exit_code == 2 and "under 10 minutes" in res.output


def test_max_restarts_zero_means_no_relaunch(ec2_aws, tiny_dataset):
    res = _launch(tiny_dataset, "--spot", "--max-restarts", "0", "--detach")
    assert res.exit_code == 0, res.output
    with open_default() as ledger:
        (run,) = ledger.list()
    assert Ec2State.load(run.run_dir).options.max_restarts == 0  # not the default 3
    assert CliRunner().invoke(app, ["runs", "stop", run.id]).exit_code == 0
