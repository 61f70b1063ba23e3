"""`finetune sweep --max-eur` takes the launch's rules: zero and negative caps are refused
(a local sweep costs 0 EUR, so the old check let a zero cap pass, and called a negative one
'more than' the estimate)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from finetune.cli import app


@pytest.mark.parametrize(
    ("cap", "message"),
    [("0", "--max-eur 0 caps spending at nothing"), ("-1", "--max-eur -1 is negative")],
)
def test_sweep_refuses_a_zero_or_negative_cap(tiny_dataset, cap, message):
    args = ["sweep", "smoke-resnet18", "--dataset", str(tiny_dataset), "--grid", "cpus=1"]
    res = CliRunner().invoke(app, [*args, "--max-eur", cap, "--dry-run"])
    assert res.exit_code == 2 and message in res.output and "To fix:" in res.output
    ok = CliRunner().invoke(app, [*args, "--max-eur", "0.5", "--dry-run"])
    assert ok.exit_code == 0, ok.output  # a positive cap over a free local sweep passes
