"""Folder listing and the seeded per-class split."""

from __future__ import annotations

import pytest

from finetune.data.listing import list_images, natural_key
from finetune.data.split import SplitSpec, check_class_sizes, split_class, validate_spec
from finetune.errors import DataError


def _touch(root, *paths):
    for p in paths:
        f = root / p
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")


def test_natural_sort_and_extensions(tmp_path):
    _touch(
        tmp_path,
        "class10/a.JPG",
        "class2/b.jpeg",
        "class2/c.PNG",
        "class2/sub/d.webp",
        "class2/e.bmp",
        "class2/notes.txt",
        "class2/.hidden.jpg",
        ".cache/x.jpg",
        "class1/z.jpg",
    )
    listing = list_images(tmp_path)
    assert listing.classes == ["class1", "class2", "class10"]
    assert listing.samples["class2"] == [
        "class2/b.jpeg",
        "class2/c.PNG",
        "class2/e.bmp",
        "class2/sub/d.webp",
    ]
    assert listing.ignored == [("class2/notes.txt", "not an image file extension")]
    assert sorted(["img10", "img9", "Img1"], key=natural_key) == ["Img1", "img9", "img10"]


def test_caltech_quirks_are_handled(image_folder):
    listing = list_images(image_folder)
    assert len(listing.classes) == 8
    assert any(p.endswith("RENAME2") for p, _ in listing.ignored)
    assert all(len(v) == 16 for v in listing.samples.values())  # empty greg/vision309 adds none


def test_missing_root_and_empty_classes(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        list_images(tmp_path / "nope")
    with pytest.raises(DataError, match="no class folders"):
        list_images(tmp_path)
    _touch(tmp_path, "a/1.jpg", "b/readme.txt")
    (tmp_path / "c").mkdir()
    with pytest.raises(DataError, match=r"2 class folder.*b, c") as err:
        list_images(tmp_path)
    assert "--exclude" in str(err.value)
    assert list_images(tmp_path, exclude=("b", "c")).classes == ["a"]
    with pytest.raises(DataError, match="not in"):
        list_images(tmp_path, exclude=("zzz",))


def test_split_is_seeded_and_per_class():
    items = [f"c/{i}.jpg" for i in range(100)]
    spec = SplitSpec(seed=3, train_per_class=60)
    train, val = split_class("c", items, spec)
    assert len(train) == 60 and len(val) == 40 and set(train) | set(val) == set(items)
    assert split_class("c", items, spec) == (train, val)
    assert split_class("c", items, SplitSpec(seed=4, train_per_class=60))[0] != train
    assert split_class("other", items, spec)[0] != train  # each class has its own stream


def test_val_ratio_keeps_one_for_validation():
    train, val = split_class("c", ["a", "b", "c"], SplitSpec(val_ratio=0.1))
    assert len(val) == 1 and len(train) == 2


def test_short_classes_and_bad_specs():
    with pytest.raises(DataError, match="lower --train-per-class below 5"):
        check_class_sizes({"a": list("abcde"), "b": list("x" * 80)}, SplitSpec(train_per_class=60))
    for bad in (SplitSpec(), SplitSpec(train_per_class=5, val_ratio=0.2), SplitSpec(val_ratio=1.5)):
        with pytest.raises(DataError):
            validate_spec(bad)
