"""A local run of several torch processes (torchrun's elastic agent) leaves nothing in the
system's temporary folder: the agent's logs go to the run's own folder and are removed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.cli import app

pytestmark = pytest.mark.slow


def test_a_two_process_torch_run_leaves_no_torchelastic_folder(tiny_dataset, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    scratch = tmp_path / "tmp"  # the system temporary folder of the run's processes
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    res = CliRunner().invoke(
        app,
        ["launch", "smoke-resnet18-torch", "--dataset", str(tiny_dataset), "--cpus", "2",
         "epochs=1", "max_batches_per_epoch=1", "--json"],  # one step: the folder is the point
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{") :])
    assert out["status"] == "completed" and out["devices_per_host"] == 2
    assert [p.name for p in scratch.iterdir() if p.name.startswith("torchelastic")] == []
    run_dir = Path(out["run_dir"])  # the logs were the run's own, and are gone with its end
    assert run_dir.is_relative_to(os.environ["FINETUNE_DATA_DIR"])
    left = [str(p) for p in run_dir.rglob("torchelastic*")]
    assert left == [], left
