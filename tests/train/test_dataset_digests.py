"""Issue 23 #9, the trainer's side: the channels' manifest must be the one `launch` planned
with (its sha256 travels in the hyperparameters, which only the launch writes), and every
record file must have the sha256 that manifest lists -- sizes alone would let anyone who can
write the dataset's S3 prefix swap the data under a run. And a manifest's names are checked on
every parse: class names are shown in terminals and written to classes.json."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from finetune.data import manifest as mf
from finetune.errors import DataError
from finetune.train import dataset

from .conftest import hparams


@pytest.fixture
def channels(tmp_path, tiny_dataset):
    out = {}
    for name in ("train", "validation"):
        out[name] = tmp_path / name
        shutil.copytree(tiny_dataset, out[name], ignore=shutil.ignore_patterns(".*"))
    return out


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()  # the oracle: hashlib, by hand


def _flip(path, offset: int = 200) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _resolve(channels, manifest_sha: str):
    hp = hparams(dataset_manifest_sha256=manifest_sha)
    return dataset.resolve(channels["train"], channels["validation"], hp)


def test_the_planned_dataset_resolves(channels):
    files = _resolve(channels, _sha(channels["train"] / mf.MANIFEST))
    assert files.train_count == 80


@pytest.mark.parametrize("split", ["train", "validation"])
def test_a_record_file_changed_in_place_is_refused(channels, split):
    sha = _sha(channels["train"] / mf.MANIFEST)
    name = "shapes_train.rec" if split == "train" else "shapes_val.rec"
    size = (channels[split] / name).stat().st_size
    _flip(channels[split] / name)
    assert (channels[split] / name).stat().st_size == size  # a size check cannot see it
    dataset.resolve(channels["train"], channels["validation"], hparams())  # nor the old checks
    with pytest.raises(DataError, match=rf"(?s){name} does not have the sha256.*To fix"):
        _resolve(channels, sha)


def test_an_index_changed_in_place_is_refused(channels):
    sha = _sha(channels["train"] / mf.MANIFEST)
    idx = channels["train"] / "shapes_train.idx"
    lines = idx.read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]  # same bytes, other order
    idx.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"shapes_train\.idx does not have the sha256"):
        _resolve(channels, sha)


def test_a_rewritten_manifest_that_vouches_for_new_data_is_refused(channels):
    """Whoever swaps the data can rewrite the manifest to match: the planned digest holds."""
    planned = _sha(channels["train"] / mf.MANIFEST)
    for split in ("train", "validation"):
        rec = channels[split] / "shapes_train.rec"
        _flip(rec)
        doc = json.loads((channels[split] / mf.MANIFEST).read_text())
        doc["files"]["shapes_train.rec"]["sha256"] = _sha(rec)
        (channels[split] / mf.MANIFEST).write_text(json.dumps(doc))
    dataset.resolve(channels["train"], channels["validation"], hparams())  # consistent...
    with pytest.raises(DataError, match=r"(?s)not the manifest this run was planned with.*To fix"):
        _resolve(channels, planned)


def test_the_plan_carries_the_manifests_digest(tiny_dataset):
    from finetune.plan import Resources, build_plan

    plan = build_plan("smoke-resnet18", tiny_dataset, Resources(), ["image_size=32"])
    want = _sha(tiny_dataset / mf.MANIFEST)
    assert plan.hyperparameters.dataset_manifest_sha256 == want == plan.dataset.manifest_sha256
    assert plan.hyperparameters.to_strings()["dataset_manifest_sha256"] == want


@pytest.mark.parametrize(
    "classes",
    [["../../etc", "b"], ["a/b", "c"], ["..", "c"], ["", "c"], ["a\\b", "c"],
     ["\x1b]0;owned\x07cat", "dog"], ["cat\x1b[2J", "dog"], ["line\nbreak", "dog"]],
)  # fmt: skip
def test_class_names_are_checked_on_every_parse(tiny_dataset, classes):
    doc = json.loads((tiny_dataset / mf.MANIFEST).read_text())
    doc["classes"] = classes + doc["classes"][len(classes) :]
    with pytest.raises(DataError, match=r"(?s)class name.*To fix"):
        mf.parse(json.dumps(doc), "s3://bucket/finetune/datasets/x/train/manifest.json")


def test_ordinary_class_names_still_parse(tiny_dataset):
    doc = json.loads((tiny_dataset / mf.MANIFEST).read_text())
    doc["classes"] = ["001.ak47", "café au lait", "日本", "a b (c)", *doc["classes"][4:]]
    assert mf.parse(json.dumps(doc), "x").classes[:4] == doc["classes"][:4]


def test_a_dataset_name_with_a_path_is_refused_on_parse(tiny_dataset):
    doc = json.loads((tiny_dataset / mf.MANIFEST).read_text())
    doc["name"] = "../../escape"
    with pytest.raises(DataError, match="not a plain dataset name"):
        mf.parse(json.dumps(doc), "s3://bucket/finetune/datasets/x/train/manifest.json")
