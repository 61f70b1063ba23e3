"""A cloud dry-run's golden output at 80 and 120 columns: the plan first, then the job, one
screen; no line wider than the terminal except where one S3 URI alone is (URIs and paths
stay whole so they can be copied: `aligned` in finetune/cli/_plan_view.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from finetune.cli import app


@pytest.mark.parametrize("columns", [80, 120])
def test_sagemaker_dry_run_fits(cloud, tiny_dataset, columns):
    argv = ["launch", "smoke-resnet18-torch", "--dataset", str(tiny_dataset),
            "--instance", "ml.g5.xlarge", "--dry-run"]  # fmt: skip
    res = CliRunner().invoke(app, argv, env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "Plan:" and len(lines) <= 45, res.stdout
    room = columns - 20  # beside the labels
    for line in lines:
        if len(line) > columns:  # only where one URI is longer than the room beside the label
            uri = max(line.split(), key=len)
            assert len(uri) > room and ("s3://" in uri or ".dkr.ecr." in uri), line
