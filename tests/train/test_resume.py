"""Kill the trainer and start it again: it resumes from its newest complete checkpoint.

SIGKILL loses at most one checkpoint interval; SIGTERM loses nothing (the trainer finishes
its batch, checkpoints and exits 75, EXIT_STOPPED: unfinished). Both run ``python -m
finetune.train`` as a container does, on a temporary /opt/ml tree, and the finished run has
every epoch exactly once.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from finetune.contracts.container import EXIT_STOPPED, STOPPED_MARK, read_stopped
from finetune.contracts.metrics import read as read_metrics

from .conftest import Output, hparams, make_tree, start_trainer

pytestmark = [pytest.mark.mxnet, pytest.mark.slow]

EPOCHS, STEPS = 2, 10  # 80 images in batches of 8; the signals come in the last epoch
INTERVAL = 1.0


@pytest.fixture
def root(tmp_path, tiny_dataset):
    pytest.importorskip("mxnet")
    # 64 px and SGD: about 0.1 s a batch here, so a run lasts a few seconds
    hp = hparams(
        epochs=EPOCHS,
        image_size=64,
        optimizer="sgd",
        lr=0.01,
        lr_per_device=0.01,
        checkpoint_interval_s=INTERVAL,
    )
    return make_tree(tmp_path / "ml", tiny_dataset, hp)


def _newest_state(root) -> dict:
    newest = max((root / "checkpoints").glob("ckpt-*"), key=lambda p: p.name)
    assert (newest / "COMPLETE").is_file()
    return json.loads((newest / "state.json").read_text())


def _run_to_the_end(root) -> Output:
    out = Output(start_trainer(root, "train", FINETUNE_LOG_EVERY="1"))
    assert out.finish() == 0, out.text()
    return out


def _assert_finished(root, second: Output, resumed_step: int) -> None:
    assert second.values("finetune-resume", "step") == [resumed_step]
    steps = second.values("finetune-progress", "step")
    assert steps == list(range(resumed_step + 1, EPOCHS * STEPS + 1))
    events = read_metrics(root / "output" / "data" / "metrics.jsonl")
    assert [e.epoch for e in events] == list(range(EPOCHS))  # each epoch once
    assert all(e.samples == 80 for e in events)
    assert (root / "model" / "model-0000.params").is_file()


def test_sigkill_loses_at_most_one_checkpoint_interval(root):
    first = Output(start_trainer(root, "train", FINETUNE_LOG_EVERY="1"))
    # kill mid-epoch, after at least one interval checkpoint
    first.wait_for(lambda: (first.values("finetune-progress", "step") or [0])[-1] >= 16)
    first.proc.send_signal(signal.SIGKILL)
    killed_at = time.time()
    assert first.finish() == -signal.SIGKILL
    reached = first.values("finetune-progress", "step")[-1]

    state = _newest_state(root)
    assert state["step"] <= reached
    assert killed_at - state["saved_at"] <= INTERVAL + 5.0, "lost more than one interval"
    assert state["epoch"] * STEPS + state["batch"] == state["step"]

    second = _run_to_the_end(root)
    _assert_finished(root, second, state["step"])


def test_sigterm_checkpoints_and_loses_nothing(root):
    first = Output(start_trainer(root, "train", FINETUNE_LOG_EVERY="1"))
    first.wait_for(lambda: (first.values("finetune-progress", "step") or [0])[-1] >= 13)
    first.proc.send_signal(signal.SIGTERM)
    assert first.finish() == EXIT_STOPPED, first.text()  # unfinished: not 0
    assert "stopped by SIGTERM, checkpoint saved" in first.text()
    assert read_stopped(root)["signal"] == "SIGTERM"
    assert (root / "output" / "failure").read_text().startswith(STOPPED_MARK)
    reached = first.values("finetune-progress", "step")[-1]
    state = _newest_state(root)
    assert (state["reason"], state["step"]) == ("SIGTERM", reached)  # not one batch lost
    assert not (root / "model").exists() or not any((root / "model").iterdir())

    second = _run_to_the_end(root)
    _assert_finished(root, second, reached)
