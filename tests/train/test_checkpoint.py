"""Atomic checkpoints: complete ones are found, torn or half-written ones are not."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from finetune.train.engines.mxnet.checkpoint import (  # noqa: E402
    COMPLETE,
    PARAMS,
    CheckpointDir,
)

pytestmark = pytest.mark.mxnet


def _net_and_trainer():
    net = mx.gluon.nn.Dense(3, in_units=4)
    net.initialize()
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    with mx.autograd.record():
        loss = net(mx.nd.ones((2, 4))).sum()
    loss.backward()
    trainer.step(2)
    return net, trainer


def test_save_then_latest_round_trips(tmp_path):
    net, trainer = _net_and_trainer()
    ckpts = CheckpointDir(tmp_path)
    assert ckpts.latest() is None
    saved = ckpts.save(net, trainer, {"step": 7})
    latest = ckpts.latest()
    assert latest.directory == saved.directory == tmp_path / "ckpt-000001"
    assert latest.state == {"step": 7}
    other = mx.gluon.nn.Dense(3, in_units=4)
    other.load_parameters(str(latest.params))
    np.testing.assert_array_equal(other.weight.data().asnumpy(), net.weight.data().asnumpy())
    trainer.load_states(str(latest.trainer_states))


def test_keeps_the_two_newest(tmp_path):
    net, trainer = _net_and_trainer()
    ckpts = CheckpointDir(tmp_path)
    for step in range(4):
        ckpts.save(net, trainer, {"step": step})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000003", "ckpt-000004"]
    assert ckpts.latest().state == {"step": 3}


def test_torn_or_unmarked_checkpoints_are_skipped(tmp_path):
    net, trainer = _net_and_trainer()
    ckpts = CheckpointDir(tmp_path)
    ckpts.save(net, trainer, {"step": 1})
    newest = ckpts.save(net, trainer, {"step": 2}).directory
    with open(newest / PARAMS, "r+b") as f:  # a partial copy, e.g. from S3
        f.truncate(10)
    assert ckpts.latest().state == {"step": 1}
    (newest / COMPLETE).unlink()  # killed before the marker
    assert ckpts.latest().state == {"step": 1}
    # the next save gets a fresh number and becomes the newest
    assert ckpts.save(net, trainer, {"step": 3}).directory.name == "ckpt-000003"
    assert ckpts.latest().state == {"step": 3}


def test_temporaries_of_a_killed_process_are_removed(tmp_path):
    stale = tmp_path / ".tmp-ckpt-000001-999999"
    stale.mkdir()
    (stale / "model.params").write_bytes(b"half")
    ours = tmp_path / f".tmp-ckpt-000002-{os.getpid()}"
    ours.mkdir()
    CheckpointDir(tmp_path)
    assert not stale.exists() and ours.exists()


def test_complete_marker_records_sizes(tmp_path):
    net, trainer = _net_and_trainer()
    saved = CheckpointDir(tmp_path).save(net, trainer, {"step": 1})
    record = json.loads((saved.directory / COMPLETE).read_text())
    assert record["files"][PARAMS] == (saved.directory / PARAMS).stat().st_size
