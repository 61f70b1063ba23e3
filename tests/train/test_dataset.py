"""The dataset the channels carry, checked against the manifest and the hyperparameters."""

from __future__ import annotations

import json
import shutil

import pytest

from finetune.errors import DataError
from finetune.train import dataset

from .conftest import hparams


@pytest.fixture
def channels(tmp_path, tiny_dataset):
    """Real copies (not links) of the dataset in a train and a validation channel."""
    out = {}
    for name in ("train", "validation"):
        out[name] = tmp_path / name
        shutil.copytree(tiny_dataset, out[name])
    return out


def test_resolves_both_splits(channels):
    files = dataset.resolve(channels["train"], channels["validation"], hparams())
    assert files.train_rec == channels["train"] / "shapes_train.rec"
    assert files.val_idx == channels["validation"] / "shapes_val.idx"
    assert files.train_count == 80 and len(files.classes) == 8


def test_validation_channel_may_hold_only_its_split(channels):
    (channels["validation"] / "manifest.json").unlink()
    files = dataset.resolve(channels["train"], channels["validation"], hparams())
    assert files.val_rec.is_file()


def test_manifest_missing(channels):
    (channels["train"] / "manifest.json").unlink()
    with pytest.raises(DataError, match=r"train channel: .* manifest\.json is missing"):
        dataset.resolve(channels["train"], channels["validation"], hparams())


def test_channels_with_different_datasets(channels):
    path = channels["validation"] / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["classes"][0] = "000.something-else"
    path.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="different datasets"):
        dataset.resolve(channels["train"], channels["validation"], hparams())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"num_classes": 5}, "num_classes=5 but dataset 'shapes' has 8 classes"),
        ({"num_training_samples": 800}, "num_training_samples=800 but .* 80 training images"),
    ],
)
def test_hyperparameters_that_do_not_match(channels, override, message):
    with pytest.raises(DataError, match=message) as err:
        dataset.resolve(channels["train"], channels["validation"], hparams(**override))
    assert "finetune launch" in str(err.value)


def test_missing_and_truncated_record_files(channels):
    rec = channels["validation"] / "shapes_val.rec"
    rec.write_bytes(rec.read_bytes()[:100])
    with pytest.raises(DataError, match="has 100 bytes, the manifest says"):
        dataset.resolve(channels["train"], channels["validation"], hparams())
    (channels["train"] / "shapes_train.idx").unlink()
    with pytest.raises(DataError, match=r"shapes_train\.idx is missing"):
        dataset.resolve(channels["train"], channels["validation"], hparams())
