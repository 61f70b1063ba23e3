"""A run trains on what it was planned on, with numbers it can train with (issue 25, items
3c, 3g and 8): a diverged loss fails the run instead of "completing" it with NaN weights; a
learning rate float32 cannot hold is refused at launch; a resume refuses a dataset prepared
again with another split in between. All through the CLI and the local backend."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest
from typer.testing import CliRunner

from finetune.backends.local.runner import lock_held
from finetune.cli import app
from finetune.runs.ledger import open_default

SMOKE = {
    "mxnet": ["smoke-resnet18", "image_size=32", "batch_per_device=8"],
    "torch": ["smoke-resnet18-torch"],
}


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _only_run():
    with open_default() as ledger:
        runs = ledger.list()
    assert len(runs) == 1
    return runs[0]


def _status(run_id: str) -> str:
    return json.loads(_cli("runs", "show", run_id, "--json").output)["status"]


def _wait(pred, timeout: float = 180.0, every: float = 0.3):
    end = time.time() + timeout
    while time.time() < end:
        if value := pred():
            return value
        time.sleep(every)
    raise AssertionError("timed out waiting")


@pytest.mark.slow
@pytest.mark.parametrize("engine", list(SMOKE))
def test_a_diverged_loss_fails_the_run_on_both_engines(tiny_dataset, engine):
    pytest.importorskip("mxnet" if engine == "mxnet" else "torch")
    res = _cli("launch", *SMOKE[engine], "--dataset", str(tiny_dataset), "epochs=1", "lr=1e30")
    assert res.exit_code != 0, res.output
    run = _only_run()
    assert run.status == "failed", (run.status, run.exit_reason)
    reason = run.exit_reason or ""
    assert "the training loss became NaN at epoch 1 step " in reason, reason  # from 1, as runs show
    assert "lower the learning rate" in reason and "Traceback" not in reason
    assert "training diverged" in res.output
    model = os.path.join(run.run_dir, "ml", "model")
    assert not os.path.isdir(model) or not os.listdir(model)  # no model of NaN weights
    with open_default() as ledger:
        assert ledger.epochs(run.id) == []  # no epoch was reported with a NaN loss


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["lr=1e308"], "optimizer.lr_per_device = 1e+308 overflows to infinity in float32"),
        (["lr=1e-50"], "optimizer.lr_per_device = 1e-50 rounds to 0 in float32"),
        (["lr=1e38", "model.head_lr_mult=10"], "the head's learning rate (lr x model.head_lr_"),
    ],
)
def test_a_learning_rate_float32_cannot_hold_is_refused_before_launch(
    tiny_dataset, overrides, named
):
    """The old code accepted lr=1e308 and failed at step 1 with a raw trainer traceback."""
    res = _cli("launch", *SMOKE["mxnet"], *overrides, "--dataset", str(tiny_dataset), "--dry-run")
    assert res.exit_code == 4, res.output
    assert named in res.output and "To fix:" in res.output, res.output
    assert "Traceback" not in res.output


def _prepare(image_folder, out, seed: int) -> str:
    res = _cli(
        "prepare", "folder", str(image_folder), "--out", str(out), "--name", "shapes",
        "--train-per-class", "10", "--resize", "40", "--quality", "90", "--workers", "1",
        "--seed", str(seed), "--overwrite",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest()


@pytest.mark.slow
def test_a_resume_refuses_a_dataset_prepared_again_with_another_split(image_folder, tmp_path):
    ds = tmp_path / "shapes"
    first = _prepare(image_folder, ds, seed=0)
    # three of the ten batches an epoch: the stop is sent before training starts (the trainer
    # is seconds from its first step when runner.json appears), and the resume trains two
    # short epochs (the data check is the point, not the training; four cost ~1.5 CPU-s more)
    short = ["epochs=2", "train.max_batches_per_epoch=3"]
    res = _cli("launch", *SMOKE["mxnet"], "--dataset", str(ds), *short, "--detach")
    assert res.exit_code == 0, res.output
    run = _only_run()
    # the stop as soon as the supervisor is there to forward it (runner.json, read every
    # 50 ms): the trainer is still starting -- before its SIGTERM handler (~0.6 s into its
    # start) or while it imports its engine (finetune.train.signals: start-up) -- and ends
    # at once, "stopped" as well, without training a batch to checkpoint
    _wait(lambda: os.path.exists(os.path.join(run.run_dir, "runner.json")), every=0.05)
    assert _status(run.id) == "running"
    assert _cli("runs", "stop", run.id).exit_code == 0
    # asked once no process of the run holds its lock (tried every 50 ms): a `runs show`
    # every 0.3 s while the trainer ends costs ~40 ms of CPU each
    _wait(lambda: not lock_held(run.run_dir), every=0.05)
    ended = _wait(lambda: (s := _status(run.id)) not in ("running", "stopping", "submitted") and s)
    if ended == "completed":
        pytest.skip("the run finished before the stop arrived (machine too fast)")
    assert ended == "stopped"
    # the same counts, another split: only the manifest (seed) and the records differ
    second = _prepare(image_folder, ds, seed=1)
    assert second != first
    res = _cli("launch", "--resume", run.id)
    assert res.exit_code == 3, res.output
    assert first in res.output and second in res.output, res.output
    assert "shapes_train.rec" in res.output and "resuming would train on other data" in res.output
    assert "To fix:" in res.output
    assert _status(run.id) == "stopped"  # the refusal changed nothing
    # prepared again exactly as before: the records are the same bytes (only the manifest's
    # date differs), so the run resumes and completes every epoch once
    third = _prepare(image_folder, ds, seed=0)
    assert third != first
    res = _cli("launch", "--resume", run.id, "--json")
    assert res.exit_code == 0, res.output
    final = json.loads(res.output[res.output.index("{") :])
    assert final["status"] == "completed"
    assert [e["epoch"] for e in final["epochs"]] == [1, 2]  # JSON counts from 1
