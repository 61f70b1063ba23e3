"""`finetune predict` and `finetune export` on real (tiny) trainings of both engines.

The oracle: a run's own validation images, given to `predict` as image files, get exactly
the top-1 classes the run recorded for them at its best epoch (saved predictions), so the
hits reproduce the recorded validation accuracy as a count. The exported model (ONNX through
onnxruntime; MXNet's symbol + params) gives predict's top-1 on the same tensors.
"""

from __future__ import annotations

import csv
import io
import json
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.runs.ledger import open_default
from finetune.runs.run import Run
from tests.valimages import val_images

from .conftest import hparams, make_tree

pytestmark = [
    pytest.mark.filterwarnings("ignore:Cannot decide type:UserWarning"),
    pytest.mark.slow,  # its fixtures train a model per engine (tens of seconds on 2 cores)
]

ENGINES = {
    "torch": dict(engine="torch", model="resnet18", loader_workers=0),
    "mxnet": dict(engine="mxnet", model="resnet18_v1"),
}


@pytest.fixture(scope="module", params=list(ENGINES))
def trained(request, tmp_path_factory, tiny_dataset):
    """(engine, run folder) of a finished 2-epoch run on the tiny dataset."""
    engine = request.param
    pytest.importorskip("torch" if engine == "torch" else "mxnet")
    from finetune.contracts.container import Layout
    from finetune.contracts.engine import runtime
    from finetune.train.layout import load_job

    run_dir = tmp_path_factory.mktemp(f"run-{engine}")
    hp = hparams(epochs=2, max_batches_per_epoch=6, keep_checkpoints=1, **ENGINES[engine])
    root = make_tree(run_dir / "ml", tiny_dataset, hp, checkpoint_local_path=None)
    assert runtime(engine).fit(load_job(Layout(root))).stopped_by is None
    return engine, run_dir


def _ledger_run(run_dir, engine: str, status: str = "completed") -> str:
    run_id = f"ft-20260101-000000-{engine[:4]}"
    with open_default() as ledger:
        ledger.create(
            Run(run_id, time.time(), "smoke", "shapes", "local", status, {}, run_dir=str(run_dir))
        )
    return run_id


def _recorded(run_dir):
    """(best epoch's top-1 per validation record, val-report.json) as the run saved them."""
    out = run_dir / "ml" / "output" / "data"
    report = json.loads((out / "val-report.json").read_text())
    with open(out / "predictions" / f"val-epoch-{report['epoch']:03d}.csv", newline="") as f:
        top1 = [int(r["top1"]) for r in csv.DictReader(f)]
    return top1, report


def test_predict_reproduces_the_recorded_validation_accuracy(trained, tiny_dataset, tmp_path):
    engine, run_dir = trained
    run_id = _ledger_run(run_dir, engine)
    labels = val_images(tiny_dataset, tmp_path / "val")
    res = CliRunner().invoke(
        app, ["predict", run_id[:-2], str(tmp_path / "val"), "--format", "CSV", "--top-k", "3"]
    )
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.output)))
    assert len(rows) == 3 * len(labels) and {r["rank"] for r in rows} == {"1", "2", "3"}
    top1 = [int(r["label"]) for r in rows if r["rank"] == "1"]
    recorded, report = _recorded(run_dir)
    assert top1 == recorded  # image by image, not just the total
    hits = sum(p == t for p, t in zip(top1, labels, strict=True))
    assert (hits, len(labels)) == (round(report["accuracy"] * report["count"]), report["count"])

    # keep_checkpoints=1: the newest checkpoint stays, and the best one (the model's weights)
    folder = run_dir / "ml" / "checkpoints"
    kept = {p.name for p in folder.glob("ckpt-*")}
    assert kept == {"ckpt-000002", (folder / "BEST").read_text().strip()}

    one = str(tmp_path / "val" / "0003.jpg")
    args = ["predict", run_id, one, "--format", "json", "--top-k", "99"]
    doc = json.loads(CliRunner().invoke(app, args).output)
    top = doc["predictions"][0]["top"]
    assert doc["engine"] == engine and len(top) == 8  # top-k capped at the class count
    assert top[0]["label"] == recorded[3] and sum(t["probability"] for t in top) == pytest.approx(1)


def test_export_gives_predicts_top1(trained, tiny_dataset, tmp_path):
    engine, run_dir = trained
    run_id = _ledger_run(run_dir, engine)
    val_images(tiny_dataset, tmp_path / "val")
    out = tmp_path / "exported"
    res = CliRunner().invoke(app, ["export", run_id, "--out", str(out)])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in out.iterdir())
    assert {"classes.json", "preprocessing.json", "hyperparameters.json"} <= set(names)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
    predicted = _predict_top1(run_id, tmp_path / "val")
    tensors = _validation_tensors(engine, run_dir, tmp_path / "val", tmp_path / "packed")
    if engine == "torch":
        import onnxruntime as ort

        assert "model.onnx" in names
        session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
        scores = session.run(None, {"data": tensors})[0]
    else:
        import mxnet as mx

        assert {"model-symbol.json", "model-0000.params"} <= set(names)
        net = mx.gluon.SymbolBlock.imports(
            str(out / "model-symbol.json"), ["data"], str(out / "model-0000.params")
        )
        scores = net(mx.nd.array(tensors)).asnumpy()
        assert _predict_top1(str(out), tmp_path / "val") == predicted  # a model folder too
    assert list(scores.argmax(1)) == predicted

    again = CliRunner().invoke(app, ["export", run_id, "--out", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output and "To fix:" in again.output


def _predict_top1(run_or_folder, folder) -> list[int]:
    res = CliRunner().invoke(app, ["predict", run_or_folder, str(folder), "--format", "json"])
    assert res.exit_code == 0, res.output
    return [p["top"][0]["label"] for p in json.loads(res.output)["predictions"]]


def _validation_tensors(engine, run_dir, folder, packed_dir) -> np.ndarray:
    """The tensors `predict` feeds the network: the engine's own validation transform."""
    from finetune.inference import inputs
    from finetune.train import preprocess

    packed_dir.mkdir()
    packed = inputs.pack(inputs.collect([str(folder)]), packed_dir)
    model_dir = run_dir / "ml" / "model"
    if engine == "torch":
        from finetune.train.engines.torch import validation
        from finetune.train.engines.torch.resident import ImageStore

        contract = preprocess.load(model_dir)
        store = ImageStore.load(packed.rec, packed.idx, contract, "cpu")
        batches = validation.resident_batches(store, contract)
        return np.concatenate([x.contiguous().numpy() for x, _ in batches])
    from finetune.contracts.hparams import TrainHyperparameters
    from finetune.train.engines.mxnet.data import record_iter

    hp = TrainHyperparameters.from_strings(
        json.loads((model_dir / "hyperparameters.json").read_text())
    )
    it = record_iter(packed.rec, packed.idx, hp, 64, train=False)
    return it.next().data[0].asnumpy()[: len(packed.images)]
