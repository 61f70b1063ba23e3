"""`prepare --test-ratio / --test-per-class`: a held-out test split beside train and val."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.data import lst
from finetune.data import manifest as mf
from finetune.data.datasets import prepare_folder
from finetune.data.recordio import RecordReader, unpack_header
from finetune.data.split import SplitSpec, split_class, split_parts
from finetune.errors import DataError

P = dict(train_per_class=10, resize=40, quality=90)


def _paths(out: Path, name: str, split: str) -> list[str]:
    return [row[2] for row in lst.read(out / f"{name}_{split}.lst")]


def _cli(*args: str):
    return CliRunner().invoke(app, ["prepare", "folder", *args], catch_exceptions=False)


def test_test_per_class_through_the_cli(image_folder, tmp_path):
    out = tmp_path / "o"
    res = _cli(str(image_folder), "--out", str(out), "--name", "shapes", "--resize", "40",
               "--train-per-class", "10", "--test-per-class", "2", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    m = mf.DatasetManifest.model_validate(json.loads(res.output))
    assert m.splits["train"].per_class == [10] * 8
    assert m.splits["val"].per_class == [4] * 8
    assert m.splits["test"].per_class == [2] * 8 and m.splits["test"].count == 16
    for ext in ("rec", "idx", "lst"):
        assert (out / m.file_name("test", ext)).is_file()
        assert m.file_name("test", ext) in m.files
    assert mf.verify(out, mf.load(out)) == []
    splits = {s: _paths(out, "shapes", s) for s in ("train", "val", "test")}
    sets = {s: set(v) for s, v in splits.items()}
    assert all(len(sets[s]) == len(splits[s]) for s in splits)  # no image twice in a split
    assert not (sets["train"] & sets["val"] or sets["train"] & sets["test"])
    assert not sets["val"] & sets["test"]
    assert len(sets["train"] | sets["val"] | sets["test"]) == 128  # every usable image used
    # the test records carry the labels of their class folders
    with RecordReader(out / "shapes_test.rec", out / "shapes_test.idx") as r:
        for index, label, path in lst.read(out / "shapes_test.lst"):
            header, _ = unpack_header(r.read_key(index))
            assert (header.id, header.label) == (index, label)
            assert m.classes[int(label)] == path.split("/")[0]
    summary = _cli(str(image_folder), "--out", str(out), "--name", "shapes", "--resize", "40",
                   "--train-per-class", "10", "--test-per-class", "2")  # fmt: skip
    assert "Already prepared" in summary.output and "test     16 images" in summary.output


def test_a_test_split_leaves_the_training_images_alone(image_folder, tmp_path):
    """Same seed, with and without a test split: the same training images (the test images
    come out of validation), byte-identical training files."""
    plain = prepare_folder(image_folder, tmp_path / "a", "shapes", P, workers=1)
    held = prepare_folder(image_folder, tmp_path / "b", "shapes", {**P, "test_per_class": 3})
    assert "test" not in plain.manifest.splits
    assert not any("_test." in name for name in plain.manifest.files)
    assert plain.manifest.params.test_ratio is None and plain.manifest.params.test_per_class is None
    for ext in ("rec", "idx", "lst"):
        name = f"shapes_train.{ext}"
        assert plain.manifest.files[name] == held.manifest.files[name]
    val_a = set(_paths(tmp_path / "a", "shapes", "val"))
    val_b, test_b = (set(_paths(tmp_path / "b", "shapes", s)) for s in ("val", "test"))
    assert val_b | test_b == val_a and not val_b & test_b


def test_test_ratio_is_reproducible_and_seeded(image_folder, tmp_path):
    params = {"val_ratio": 0.25, "test_ratio": 0.25, "resize": 40}
    a = prepare_folder(image_folder, tmp_path / "a", "s", params, workers=1)
    b = prepare_folder(image_folder, tmp_path / "b", "s", params, workers=2)
    prepare_folder(image_folder, tmp_path / "c", "s", {**params, "seed": 7}, workers=1)
    assert a.manifest.files == b.manifest.files  # same seed: same bytes, any worker count
    assert a.manifest.splits["test"].per_class == [4] * 8
    assert a.manifest.splits["val"].per_class == [4] * 8
    assert a.manifest.splits["train"].per_class == [8] * 8
    assert _paths(tmp_path / "a", "s", "test") != _paths(tmp_path / "c", "s", "test")
    # the parameters are part of the dataset's identity: same request reuses, another refuses
    again = prepare_folder(image_folder, tmp_path / "a", "s", params, workers=1)
    assert again.reused
    with pytest.raises(DataError, match="different dataset"):
        prepare_folder(image_folder, tmp_path / "a", "s", {**params, "test_ratio": 0.2})


def test_split_parts_orders_train_val_test():
    items = [f"img{i}" for i in range(20)]
    spec = SplitSpec(seed=5, train_per_class=10, test_per_class=4)
    train, val, test = split_parts("c", items, spec)
    assert (len(train), len(val), len(test)) == (10, 6, 4)
    plain_train, plain_val = split_class("c", items, SplitSpec(seed=5, train_per_class=10))
    assert train == plain_train and plain_val == val + test


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--train-per-class", "10", "--test-per-class", "6"], "too small for this split"),
        (["--val-ratio", "0.5", "--test-ratio", "0.5"], "leave no images to train on"),
        (["--val-ratio", "0.2", "--test-ratio", "1.5"], "--test-ratio must be between 0 and 1"),
        (["--test-ratio", "0.1", "--test-per-class", "2"], "at most one of --test-ratio"),
        (["--val-ratio", "0.05", "--test-ratio", "0.94"], "too small for this split"),
    ],
)
def test_impossible_test_splits_are_refused_before_any_work(image_folder, tmp_path, args, message):
    out = tmp_path / "o"
    res = _cli(str(image_folder), "--out", str(out), "--resize", "40", *args)
    assert res.exit_code == 3, res.output
    assert message in res.output and "To fix:" in res.output
    assert not out.exists() or list(out.iterdir()) == []
