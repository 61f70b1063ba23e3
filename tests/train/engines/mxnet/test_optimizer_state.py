"""The MXNet engine's optimizer state goes through mx.nd.save + JSON, never pickle.

A run stopped after k steps and resumed from what optstate saved ends with exactly the
weights of the same run never stopped (the oracle: the uninterrupted run, computed here), for
every optimizer a recipe can name, on one device and on two (the kvstore path and the
per-device updaters). A pickle planted in a checkpoint (MXNet's old ``trainer.states`` name,
or in place of the arrays) is never unpickled: resume refuses it or ignores it.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from mxnet import autograd, gluon  # noqa: E402

from finetune.contracts.container import Layout  # noqa: E402
from finetune.errors import DataError  # noqa: E402
from finetune.train.checkpoints import COMPLETE  # noqa: E402
from finetune.train.engines.mxnet import RUNTIME, optstate  # noqa: E402
from finetune.train.layout import load_job  # noqa: E402
from tests.train.conftest import hparams, make_tree  # noqa: E402

pytestmark = [pytest.mark.mxnet]

STEPS, STOP_AT = 6, 3
OPTIMIZERS = [
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4}),
    ("sgd", {"learning_rate": 0.1}),  # no state at all: states are None
    ("nag", {"learning_rate": 0.1, "momentum": 0.9}),
    ("adam", {"learning_rate": 0.01}),  # bias correction reads the per-index update counts
]


def _batches():
    rng = np.random.RandomState(7)
    return [(rng.randn(8, 6), rng.randint(0, 4, size=8)) for _ in range(STEPS)]


def _model(contexts, optimizer, params, update_on_kvstore):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, activation="relu", in_units=6), gluon.nn.Dense(4, in_units=5))
    net.initialize(ctx=contexts)
    rng = np.random.RandomState(3)
    for p in net.collect_params().values():
        p.set_data(mx.nd.array(rng.randn(*p.shape)))
    kv = "device" if len(contexts) > 1 else None
    trainer = gluon.Trainer(
        net.collect_params(),
        optimizer,
        dict(params),
        kvstore=kv,
        update_on_kvstore=update_on_kvstore,
    )
    return net, trainer


def _steps(net, trainer, contexts, batches):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for x, y in batches:
        xs = gluon.utils.split_and_load(mx.nd.array(x), contexts)
        ys = gluon.utils.split_and_load(mx.nd.array(y), contexts)
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xs, ys, strict=True)]
        autograd.backward(losses)
        trainer.step(len(x))


def _weights(net):
    # structural names ("0.weight"): gluon's global names differ between the two models
    params = net._collect_params_with_prefix()
    return {k: p.data(p.list_ctx()[0]).asnumpy() for k, p in params.items()}


def _resumed(tmp_path, contexts, optimizer, params, update_on_kvstore, restore=True):
    batches = _batches()
    net, trainer = _model(contexts, optimizer, params, update_on_kvstore)
    _steps(net, trainer, contexts, batches[:STOP_AT])
    net.save_parameters(str(tmp_path / "model.params"))
    optstate.save(trainer, tmp_path)
    net2, trainer2 = _model(contexts, optimizer, params, update_on_kvstore)  # a new process
    net2.load_parameters(str(tmp_path / "model.params"), ctx=contexts)
    if restore:
        optstate.load(trainer2, tmp_path)
    _steps(net2, trainer2, contexts, batches[STOP_AT:])
    return _weights(net2)


def _uninterrupted(contexts, optimizer, params, update_on_kvstore):
    net, trainer = _model(contexts, optimizer, params, update_on_kvstore)
    _steps(net, trainer, contexts, _batches())
    return _weights(net)


@pytest.mark.parametrize(
    "contexts, update_on_kvstore",
    [([mx.cpu(0)], None), ([mx.cpu(0), mx.cpu(1)], None), ([mx.cpu(0), mx.cpu(1)], False)],
    ids=["one-device", "two-devices-kvstore", "two-devices-updaters"],
)
@pytest.mark.parametrize("optimizer, params", OPTIMIZERS, ids=["sgd-m", "sgd", "nag", "adam"])
def test_a_resumed_run_ends_exactly_where_the_uninterrupted_one_does(
    tmp_path, contexts, update_on_kvstore, optimizer, params
):
    want = _uninterrupted(contexts, optimizer, params, update_on_kvstore)
    got = _resumed(tmp_path, contexts, optimizer, params, update_on_kvstore)
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    saved = json.loads((tmp_path / optstate.SCALARS).read_text())
    assert saved["num_update"] == STOP_AT
    if params.get("momentum") or optimizer == "adam":
        # the control: without the saved state the continuation differs, so the check can fail
        fresh = _resumed(tmp_path, contexts, optimizer, params, update_on_kvstore, restore=False)
        assert any(not np.array_equal(fresh[n], want[n]) for n in want)


class _Planted:
    """Unpickling this creates ``marker``: proof that someone called pickle.loads."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_an_old_pickled_checkpoint_is_refused_and_never_unpickled(tmp_path):
    contexts = [mx.cpu(0)]
    marker = tmp_path / "unpickled"
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "trainer.states").write_bytes(pickle.dumps(_Planted(marker)))
    _, trainer = _model(contexts, "adam", {"learning_rate": 0.01}, None)
    with pytest.raises(DataError, match=r"(?s)older finetune.*To fix") as caught:
        optstate.load(trainer, folder)
    assert "never loaded" in str(caught.value)
    assert not marker.exists()


def test_a_pickle_in_place_of_the_arrays_is_refused_and_never_unpickled(tmp_path):
    contexts = [mx.cpu(0)]
    marker = tmp_path / "unpickled"
    net, trainer = _model(contexts, "adam", {"learning_rate": 0.01}, None)
    _steps(net, trainer, contexts, _batches()[:1])
    optstate.save(trainer, tmp_path)
    (tmp_path / optstate.ARRAYS).write_bytes(pickle.dumps(_Planted(marker)))
    _, trainer2 = _model(contexts, "adam", {"learning_rate": 0.01}, None)
    with pytest.raises(DataError, match=r"(?s)Invalid NDArray file format.*To fix"):
        optstate.load(trainer2, tmp_path)
    assert not marker.exists()


@pytest.mark.slow
def test_the_trainer_resumes_past_a_planted_pickle(tmp_path, tiny_dataset):
    """Through the engine: a finished epoch's checkpoint gets MXNet's old optimizer file,
    a pickle (recorded in COMPLETE as a rewriter of the S3 prefix would); the run resumes from
    the new files and the pickle is never opened. Three steps an epoch, not all 10: what is
    resumed is the point, not how much is trained (12.2 -> 9.8 CPU-s with pytest's start)."""
    root = make_tree(tmp_path / "ml", tiny_dataset, _hp(epochs=1))
    RUNTIME.fit(load_job(Layout(root)))
    ckpt = max((root / "checkpoints").glob("ckpt-*"))
    assert {optstate.ARRAYS, optstate.SCALARS} <= {p.name for p in ckpt.iterdir()}
    assert not (ckpt / "trainer.states").exists()  # nothing pickled is written
    marker = tmp_path / "unpickled"
    (ckpt / "trainer.states").write_bytes(pickle.dumps(_Planted(marker)))
    record = json.loads((ckpt / COMPLETE).read_text())
    record["files"]["trainer.states"] = (ckpt / "trainer.states").stat().st_size
    (ckpt / COMPLETE).write_text(json.dumps(record))
    hp = _hp(epochs=2).to_strings()
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hp))
    result = RUNTIME.fit(load_job(Layout(root)))
    assert result.progress.step == 2 * 3 and result.stopped_by is None
    assert not marker.exists()


def _hp(epochs: int):
    return hparams(epochs=epochs, optimizer="sgd", max_batches_per_epoch=3)
