"""The README's main job: `finetune demo`, offline, end to end (small settings)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.runs.ledger import open_default

pytestmark = pytest.mark.slow


def test_demo_pretrains_finetunes_and_reports(tmp_path):
    res = CliRunner().invoke(
        app,
        ["demo", "--dir", str(tmp_path), "--classes", "3", "--per-class", "12", "--epochs", "1"],
    )
    assert res.exit_code == 0, res.output
    assert "4/4 Report" in res.output and "local-cpu" in res.output
    with open_default() as ledger:
        pre, fine = ledger.list()
    assert pre.status == fine.status == "completed"
    assert pre.plan["hyperparameters"]["pretrained"] is False
    hp = fine.plan["hyperparameters"]
    assert hp["pretrained"] is True and hp["weights"].endswith("gluon.params")
    assert hp["num_classes"] == 3 and pre.plan["hyperparameters"]["num_classes"] == 5
    assert (tmp_path / "datasets" / "target" / "manifest.json").is_file()
