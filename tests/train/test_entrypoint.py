"""The container entrypoint on a temporary /opt/ml tree: success, and every failure
leaves a reason in output/failure and a non-zero exit code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from finetune.contracts.container import ROOT_ENV
from finetune.contracts.metrics import read as read_metrics
from finetune.train.entrypoint import main

from .conftest import REPO, hparams, make_tree, trainer_env


def _failure(root) -> str:
    return (root / "output" / "failure").read_text()


def test_misnamed_channel_fails_with_a_useful_reason(tmp_path, tiny_dataset):
    root = make_tree(tmp_path / "ml", tiny_dataset, hparams(), ("training", "validation"))
    proc = subprocess.run(
        [sys.executable, "-m", "finetune.train", "train"],
        cwd=REPO,
        env=trainer_env(root),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 4, proc.stderr
    reason = _failure(root)
    assert "'training'" in reason and "Expected channels: train, validation" in reason
    assert "To fix:" in reason and len(reason) < 1024  # SageMaker shows the first 1,024 chars
    assert "training failed" in proc.stderr


def test_arguments(capsys):
    assert main(["serve"]) == 2
    assert "usage:" in capsys.readouterr().err
    assert main(["train", "--help"]) == 0
    assert "docker run IMAGE train" in capsys.readouterr().out


@pytest.fixture
def run_main(monkeypatch):
    def run(root, *args: str) -> int:
        monkeypatch.setenv(ROOT_ENV, str(root))
        return main(list(args))

    return run


@pytest.mark.mxnet
@pytest.mark.slow  # a real (short) training
def test_short_run_writes_model_metrics_and_no_failure(tmp_path, tiny_dataset, run_main):
    root = make_tree(tmp_path / "ml", tiny_dataset, hparams(epochs=1, max_batches_per_epoch=2))
    (root / "output").mkdir()
    (root / "output" / "failure").write_text("stale reason of an earlier attempt")
    assert run_main(root, "train") == 0
    assert not (root / "output" / "failure").exists()
    events = read_metrics(root / "output" / "data" / "metrics.jsonl")
    assert [e.epoch for e in events] == [0] and events[0].samples == 16
    model_dir = root / "model"
    assert {p.name for p in model_dir.iterdir()} >= {
        "model-symbol.json",
        "model-0000.params",
        "gluon.params",
        "classes.json",
        "hyperparameters.json",
    }
    manifest = json.loads((tiny_dataset / "manifest.json").read_text())
    assert json.loads((model_dir / "classes.json").read_text())["classes"] == manifest["classes"]

    # started again (a retried job): nothing left to train, the model is exported again
    (model_dir / "model-0000.params").unlink()
    assert run_main(root, "train") == 0
    assert (model_dir / "model-0000.params").is_file()
    assert len(read_metrics(root / "output" / "data" / "metrics.jsonl")) == 1


@pytest.mark.mxnet
@pytest.mark.parametrize(
    ("override", "code", "expected"),
    [
        (
            {"model": "resnet50_v1x"},
            4,
            "unknown model 'resnet50_v1x' for the mxnet engine. Did you mean \"resnet50_v1",
        ),
        ({"pretrained": True}, 3, "pretrained weights for resnet18_v1 not found"),
        ({"num_classes": 5}, 3, "num_classes=5 but dataset 'shapes' has 8 classes"),
        ({"device": "gpu"}, 4, "device=gpu but MXNet sees no GPU"),
    ],
)
def test_bad_input_fails_before_training(
    tmp_path, tiny_dataset, run_main, override, code, expected
):
    root = make_tree(tmp_path / "ml", tiny_dataset, hparams(**override))
    assert run_main(root) == code
    reason = _failure(root)
    assert expected in reason and "To fix:" in reason
    assert not (root / "model").exists() or not any((root / "model").iterdir())


@pytest.mark.mxnet
def test_no_weights_offline_says_where_to_put_them(tmp_path, tiny_dataset, run_main):
    root = make_tree(tmp_path / "ml", tiny_dataset, hparams(pretrained=True))
    assert run_main(root) == 3
    reason = _failure(root)
    assert "resnet18_v1-a0666292.params or resnet18_v1.params" in reason
    assert "an input channel named pretrained" in reason and "pretrained=false" in reason


@pytest.mark.mxnet
def test_checkpoint_of_another_class_count_is_refused(tmp_path, tiny_dataset, run_main):
    import mxnet as mx

    from finetune.train.checkpoints import CheckpointDir

    root = make_tree(tmp_path / "ml", tiny_dataset, hparams())
    net = mx.gluon.nn.Dense(5, in_units=4)
    net.initialize()
    state = {"model": "resnet18_v1", "num_classes": 5, "epoch": 1, "step": 10}
    write = lambda folder: net.save_parameters(str(folder / "model.params"))  # noqa: E731
    CheckpointDir(root / "checkpoints").save(write, state)
    assert run_main(root) == 3
    reason = _failure(root)
    assert "written for resnet18_v1 with 5 classes" in reason
    assert "this run trains resnet18_v1 with 8 classes" in reason
