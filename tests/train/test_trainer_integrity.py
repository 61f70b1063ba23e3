"""The trainer (``python -m finetune.train``, what a container or the local backend runs)
checks the records itself before an engine reads them (issue 25, items 3f and 7): a cloud run
reads a dataset that `launch` may never have seen (S3, --skip-data-checksums), and the
engines fail badly on what they are given -- MXNet segfaults on a bad .idx offset and trains
on a label outside the classes; torch fails on that label with a raw IndexError mid-run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.data import damage

from .conftest import REPO, hparams, make_tree, trainer_env

ENGINES = {
    "mxnet": dict(engine="mxnet"),
    "torch": dict(engine="torch", model="resnet18", loader_workers=0),
}


def _train(root) -> tuple[int, str, str]:
    """(exit code, output, failure reason) of one trainer run."""
    proc = subprocess.run(
        [sys.executable, "-m", "finetune.train", "train"],
        cwd=REPO,
        env=trainer_env(root),
        capture_output=True,
        text=True,
        timeout=300,
    )
    failure = root / "output" / "failure"
    reason = failure.read_text() if failure.exists() else ""
    return proc.returncode, proc.stdout + proc.stderr, reason


def _nothing_trained(root) -> bool:
    metrics = root / "output" / "data" / "metrics.jsonl"
    model = root / "model"
    no_epochs = not metrics.exists() or not metrics.read_text().strip()
    return no_epochs and not (model.exists() and any(model.iterdir()))


@pytest.mark.parametrize("engine", list(ENGINES))
def test_both_engines_refuse_a_label_outside_the_classes_before_training(
    tmp_path, tiny_dataset, engine
):
    if engine == "mxnet":
        pytest.importorskip("mxnet")
    else:
        pytest.importorskip("torch")
    ds = damage.copy(tiny_dataset, tmp_path / "shapes")
    offset = damage.offsets(ds / "shapes_train.idx")[6]
    damage.set_label(ds / "shapes_train.rec", offset, 8.0)  # 8 classes: labels 0-7
    assert damage.label_at(ds / "shapes_train.rec", offset) == 8.0
    hp = hparams(epochs=1, **ENGINES[engine])  # a whole epoch: every record is read
    root = make_tree(tmp_path / "ml", ds, hp)
    code, out, reason = _train(root)
    assert code == 3, out
    assert "shapes_train.rec: record 6 (id " in reason, reason
    assert f"at byte {offset}) has label 8" in reason
    assert "outside the dataset's 8 classes" in reason and "To fix:" in reason, reason
    assert "Traceback" not in out and "IndexError" not in out
    assert _nothing_trained(root)


@pytest.mark.mxnet
@pytest.mark.parametrize("how", ["mid-record", "past-the-end", "cut-short"])
def test_the_mxnet_trainer_refuses_damaged_records_instead_of_crashing(tmp_path, tiny_dataset, how):
    """The old trainer: "Segmentation fault" or abort (exit -11 / -6 / 255) inside MXNet."""
    from tests.data.test_dataset_integrity import DAMAGE

    ds = damage.copy(tiny_dataset, tmp_path / "shapes")
    said = DAMAGE[how](ds)
    damage.reseal(ds)  # (else the trainer's size check names the file first)
    root = make_tree(tmp_path / "ml", ds, hparams(epochs=1, max_batches_per_epoch=2))
    code, out, reason = _train(root)
    assert code == 3, out
    assert said in reason and "finetune prepare --overwrite" in reason, reason
    assert _nothing_trained(root)
