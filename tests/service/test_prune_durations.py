"""`runs prune --older-than` (and every other duration flag) needs a unit: a bare `30` once
read as 30 seconds, and `0` as now, listed every ended run for removal. Zero and negative
ages are refused too; nothing is removed by a refused prune."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.service.launch import runs_dir

from .test_removal import _add, _rows, invoke


@pytest.mark.parametrize(
    ("age", "message"),
    [
        ("30", "--older-than '30' has no unit"),
        ("0", "--older-than '0' has no unit"),
        ("0d", "it must be longer than 0"),
        ("0.2s", "it must be longer than 0"),
        ("-30d", "--older-than '-30d' is negative"),
        ("30x", "is not a duration"),
    ],
)
def test_prune_refuses_an_age_without_unit_zero_or_negative(age, message):
    week_old = _add("ft-20260101-000000-week", age_days=7)
    for dry in (["--dry-run"], []):
        res = invoke("prune", "--older-than", age, *dry)
        assert res.exit_code == 2, res.output
        assert message in res.output and "To fix:" in res.output
        assert "Would remove" not in res.output and "Removed" not in res.output
    assert (runs_dir() / week_old.id).is_dir() and _rows(week_old.id) == 4


def test_a_bare_number_is_answered_with_the_units_to_add():
    res = invoke("prune", "--older-than", "30", "--dry-run")
    assert "30d for days" in res.output and "30h hours" in res.output
    old = _add("ft-20260101-000000-old1", age_days=15)
    new = _add("ft-20260101-000000-new1", age_days=1)
    res = invoke("prune", "--older-than", "2w", "--dry-run")  # weeks are a unit now
    assert res.exit_code == 0 and "Would remove 1 run(s)" in res.output, res.output
    assert old.id in res.output and new.id not in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["launch", "smoke-resnet18", "--backend", "ec2", "--max-runtime", "7200"], "no unit"),
        (["launch", "smoke-resnet18", "--backend", "sagemaker", "--max-runtime", "0h"], "than 0"),
        (["launch", "smoke-resnet18", "--backend", "ec2", "--max-runtime", "-2h"], "negative"),
        (["cleanup", "--older-than", "6"], "--older-than '6' has no unit"),
        (["cleanup", "--older-than", "-6h"], "is negative"),
    ],
)
def test_every_duration_flag_takes_the_same_rules(tiny_dataset, args, message):
    more = ["--instance", "g5.xlarge", "--dataset", str(tiny_dataset), "--dry-run"]
    res = CliRunner().invoke(app, [*args, *more] if args[0] == "launch" else args)
    assert res.exit_code == 2, res.output
    assert message in res.output and "To fix:" in res.output
