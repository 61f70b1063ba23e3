"""SIGTERM to the process group of AWS's training toolkit, with our trainer running under it.

AWS's PyTorch training image runs ``bash -m start_with_right_hostname.sh`` as PID 1, which
starts ``train`` without exec, and the toolkit installs no signal handler
(docs/decisions/041-sagemaker-spot-checkpoints.md): a stop's SIGTERM to PID 1 most likely never
arrives, hence the spot default of a checkpoint every 300 s, which the request carries. Where a
SIGTERM does reach the whole group (``kill -TERM -PGID``), the toolkit dies at once and its
pipe with it; the trainer still finishes its batch, writes a checkpoint and records a stop
(output/stopped.json, a FailureReason that says so), not a crash, and the job's next start
resumes from that checkpoint and completes.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from finetune.contracts.container import STOPPED_MARK, read_stopped

from . import toolkit_host
from .test_toolkit_emulation import _container_s3, _launch, _namespaces_work, cloud_endpoint

pytestmark = pytest.mark.slow


def _wait_for(path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(errors="replace").count(text) >= 2:
            return
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} twice in {path} after {timeout} s:\n{path.read_text()}")


def _wait_group_gone(pgid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while toolkit_host.group(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not toolkit_host.group(pgid), "the trainer outlived its stop by more than 120 s"


def test_sigterm_to_the_group_checkpoints_and_the_next_start_resumes(cloud, tiny_dataset, tmp_path):
    if not _namespaces_work():
        pytest.skip("mount + UTS namespaces need root (unshare -mu)")
    # the recipe's resnet18: the stop must land before the first epoch ends, and its steps
    # leave that margin (a network a few times cheaper would shrink it)
    _, request = _launch(cloud, tiny_dataset, "g5.xlarge", 1, spot=True, epochs=2, model="resnet18")
    assert request["HyperParameters"]["checkpoint_interval_s"] == "60.0"  # the recipe's own
    work = tmp_path / "job"
    every_batch = {"FINETUNE_LOG_EVERY": "1"}  # (the test's: a progress line per batch)
    ((host, proc),) = toolkit_host.start(
        request, work, cloud_endpoint(), _container_s3(), every_batch
    )
    log = work / "algo-1.log"
    try:
        _wait_for(log, "finetune-progress", timeout=180)
        os.killpg(proc.pid, signal.SIGTERM)  # the toolkit, and the trainer it started
        assert proc.wait(timeout=30) == -signal.SIGTERM  # no handler: the toolkit just dies
        _wait_group_gone(proc.pid, timeout=120)  # SageMaker's SIGKILL comes after 120 s
    finally:
        for pid in toolkit_host.group(proc.pid):
            os.kill(pid, signal.SIGKILL)
    ml = host.ml
    reason = (ml / "output" / "failure").read_text()  # SageMaker's FailureReason: a stop
    assert reason.startswith(STOPPED_MARK) and read_stopped(ml)["signal"] == "SIGTERM", reason
    saved = sorted(p.name for p in (ml / "checkpoints").glob("ckpt-*"))
    assert saved, f"no checkpoint after SIGTERM:\n{log.read_text()[-3000:]}"
    state = json.loads((ml / "checkpoints" / saved[-1] / "state.json").read_text())
    assert (state["reason"], state["epoch"]) == ("SIGTERM", 0) and state["batch"] >= 2, state
    assert not any((ml / "model").iterdir())  # stopped, not finished

    ((_, again),) = toolkit_host.start(
        request, work, cloud_endpoint(), _container_s3(), fresh=False
    )
    again.wait(timeout=300)
    text = log.read_text()
    assert again.returncode == 0, text[-4000:]
    assert f"finetune-resume checkpoint={saved[-1]}" in text
    assert "training complete: 2 epoch(s)" in text
