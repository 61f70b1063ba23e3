"""`finetune prepare` onto a read-only or a full disk: a clear message, nothing published."""

from __future__ import annotations

from tests.fs_faults import FULL, READ_ONLY, assert_clear_error, finetune_in


def _prepare(setup: str, folder, images, out):
    args = ["prepare", "folder", str(images), "--out", str(out), "--resize", "40"]
    return finetune_in(setup, folder, *args)


def test_read_only_output(image_folder, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    res = _prepare(READ_ONLY, folder, image_folder, folder / "ds")
    assert_clear_error(res, 3, "cannot write the dataset", "Read-only file system", "--out")


def test_read_only_default_data_dir(image_folder, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    args = ["prepare", "folder", str(image_folder), "--resize", "40"]
    res = finetune_in(READ_ONLY, folder, *args, env={"FINETUNE_DATA_DIR": str(folder)})
    assert_clear_error(res, 3, "Read-only file system", "FINETUNE_DATA_DIR")


def test_full_disk(image_folder, tmp_path):
    folder = tmp_path / "full"
    folder.mkdir()
    res = _prepare(FULL, folder, image_folder, folder / "ds")
    assert_clear_error(res, 3, "is full", "nothing was published", "free some space")
