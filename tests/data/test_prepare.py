"""`prepare` end to end on generated image folders: outputs, determinism, bad input."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from finetune.data import lst
from finetune.data import manifest as mf
from finetune.data.datasets import prepare_folder
from finetune.data.recordio import RecordReader, unpack_header
from finetune.errors import DataError

P = dict(train_per_class=10, resize=40, quality=90)


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix != ".json"}


def test_outputs_and_manifest(image_folder, tmp_path):
    res = prepare_folder(image_folder, tmp_path / "o", "shapes", P, workers=2)
    m = res.manifest
    assert m.num_classes == 8 and m.classes[0].startswith("001.")
    assert m.splits["train"].count == 80 and m.splits["train"].per_class == [10] * 8
    assert m.splits["val"].count == 48 and m.splits["val"].per_class == [6] * 8
    assert [i.path for i in m.ignored] == ["002.rectangle-1/RENAME2"]
    assert mf.verify(tmp_path / "o", m) == []
    on_disk = mf.load(tmp_path / "o")
    assert on_disk.files == m.files and on_disk.params.train_per_class == 10
    # .lst, .idx and .rec agree: same ids, same labels, and the labels match the folders
    rows = lst.read(tmp_path / "o" / "shapes_train.lst")
    with RecordReader(tmp_path / "o/shapes_train.rec", tmp_path / "o/shapes_train.idx") as r:
        for index, label, path in rows:
            header, _ = unpack_header(r.read_key(index))
            assert (header.id, header.label) == (index, label)
            assert m.classes[int(label)] == path.split("/")[0]
    assert len({r[2] for r in rows}) == 80


def test_same_bytes_for_any_number_of_workers(image_folder, tmp_path):
    prepare_folder(image_folder, tmp_path / "a", "shapes", P, workers=1)
    prepare_folder(image_folder, tmp_path / "b", "shapes", P, workers=3)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_seed_changes_the_split(image_folder, tmp_path):
    a = prepare_folder(image_folder, tmp_path / "a", "shapes", P, workers=1)
    b = prepare_folder(image_folder, tmp_path / "b", "shapes", {**P, "seed": 1}, workers=1)
    assert a.manifest.files["shapes_train.lst"] != b.manifest.files["shapes_train.lst"]


def test_rerun_reuses_and_different_dataset_is_refused(image_folder, tmp_path):
    out = tmp_path / "o"
    first = prepare_folder(image_folder, out, "shapes", P, workers=1)
    again = prepare_folder(image_folder, out, "shapes", P, workers=1)
    assert again.reused and again.manifest.files == first.manifest.files
    before = _files(out)
    with pytest.raises(DataError, match=r"(?s)different dataset.*--overwrite"):
        prepare_folder(image_folder, out, "shapes", {**P, "resize": 32}, workers=1)
    assert _files(out) == before  # nothing destroyed
    res = prepare_folder(image_folder, out, "shapes", {**P, "resize": 32}, overwrite=True)
    assert not res.reused and res.manifest.params.resize == 32
    assert mf.verify(out, mf.load(out)) == []


def test_a_staging_folder_left_after_publishing_goes_with_the_next_run(image_folder, tmp_path):
    """A run killed after it published but before it removed its staging folder (its scratch
    file still there): the next identical run reuses the dataset and removes that folder,
    unless another prepare holds the folder's lock (then the folder is that run's)."""
    from finetune.data.lock import exclusive
    from finetune.data.prepare import LOCK, STAGING

    out = tmp_path / "o"
    prepare_folder(image_folder, out, "shapes", P, workers=2)
    (out / STAGING).mkdir()
    (out / STAGING / "encoded.bin").write_bytes(b"x" * 1000)
    with exclusive(out / LOCK):  # another prepare at work: its staging stays
        assert prepare_folder(image_folder, out, "shapes", P, workers=2).reused
        assert (out / STAGING / "encoded.bin").is_file()
    again = prepare_folder(image_folder, out, "shapes", P, workers=2)
    assert again.reused and not (out / STAGING).exists()
    assert mf.verify(out, again.manifest) == []


def test_tampered_file_is_detected_on_rerun(image_folder, tmp_path):
    out = tmp_path / "o"
    prepare_folder(image_folder, out, "shapes", P, workers=1)
    with open(out / "shapes_val.rec", "r+b") as f:
        f.seek(100)
        f.write(b"XXXX")
    with pytest.raises(DataError, match="no longer match their checksums"):
        prepare_folder(image_folder, out, "shapes", P, workers=1)


def _bad_set(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    cls = dst / "003.triangle-2"
    (cls / "zero.jpg").write_bytes(b"")
    (cls / "text.jpg").write_text("definitely not a jpeg")
    good = next(cls.glob("*.jpg")).read_bytes()
    (cls / "cut.jpg").write_bytes(good[: len(good) // 3])
    os.symlink(dst / "missing-target.jpg", cls / "dangling.jpg")
    return dst


def test_bad_images_are_skipped_and_listed(image_folder, tmp_path):
    root = _bad_set(image_folder, tmp_path / "imgs")
    res = prepare_folder(root, tmp_path / "o", "shapes", {**P, "max_bad_fraction": 0.1})
    reasons = {s.path.split("/")[-1]: s.reason for s in res.manifest.skipped}
    assert set(reasons) == {"zero.jpg", "text.jpg", "cut.jpg", "dangling.jpg"}
    assert "empty" in reasons["zero.jpg"] and "unreadable" in reasons["dangling.jpg"]
    # bad images never take a training slot: still 10 per class
    assert res.manifest.splits["train"].per_class == [10] * 8


def test_too_many_bad_images_is_fatal_and_writes_nothing(image_folder, tmp_path):
    root = _bad_set(image_folder, tmp_path / "imgs")
    out = tmp_path / "o"
    with pytest.raises(DataError, match=r"(?s)4 of 132 images.*nothing was written") as err:
        prepare_folder(root, out, "shapes", {**P, "max_bad_fraction": 0.01})
    assert "--max-bad" in str(err.value)
    assert [p.name for p in out.iterdir() if not p.name.startswith(".")] == []


def test_class_smaller_than_train_per_class(image_folder, tmp_path):
    with pytest.raises(DataError, match="lower --train-per-class below 16"):
        prepare_folder(image_folder, tmp_path / "o", "shapes", {**P, "train_per_class": 16})


def test_interrupted_run_leaves_no_finished_looking_dataset(image_folder, tmp_path, monkeypatch):
    """A crash while publishing leaves no manifest; the next run redoes it cleanly."""
    from finetune.data import prepare as prep

    out = tmp_path / "o"
    calls = {"n": 0}
    real_replace = os.replace

    def crash_on_third(src, dst):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(prep.os, "replace", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        prepare_folder(image_folder, out, "shapes", P, workers=1)
    monkeypatch.undo()
    assert not (out / "manifest.json").exists()
    assert not (out / prep.STAGING).exists()
    with pytest.raises(DataError, match="is not a prepared dataset"):
        mf.load(out)
    res = prepare_folder(image_folder, out, "shapes", P, workers=1)
    assert mf.verify(out, res.manifest) == []


def test_manifest_json_is_plain_json(tiny_dataset):
    data = json.loads((tiny_dataset / "manifest.json").read_text())
    assert data["classes"][0] == "001.ellipse-0"
    assert set(data["files"]) == {
        f"shapes_{s}.{e}" for s in ("train", "val") for e in ("rec", "idx", "lst")
    }
    assert all(len(f["sha256"]) == 64 for f in data["files"].values())
