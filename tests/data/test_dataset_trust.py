"""A prepared dataset is trusted only as far as its manifest vouches for it (issue 12): files
changed after prepare are caught at launch, and manifests this version cannot read fully
are refused with the reason."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.data.verify import CACHE

DRY_RUN = ["launch", "smoke-resnet18", "image_size=32", "batch_per_device=8", "--dry-run"]


@pytest.fixture
def dataset(tiny_dataset, tmp_path) -> Path:
    copy = tmp_path / "shapes"
    # without the digest cache that other tests' launches may have left in the shared set
    shutil.copytree(tiny_dataset, copy, ignore=shutil.ignore_patterns(CACHE))
    return copy


def _launch(dataset: Path, *extra: str):
    return CliRunner().invoke(app, [*DRY_RUN, "--dataset", str(dataset), *extra])


def _flip_a_byte(path: Path, offset: int) -> None:
    """Change one byte in place: same size (a size check cannot see it)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_a_rec_changed_after_prepare_is_refused_at_launch(dataset):
    assert _launch(dataset).exit_code == 0
    rec = dataset / "shapes_train.rec"
    _flip_a_byte(rec, 20)  # inside the first record's header: its label
    res = _launch(dataset)
    assert res.exit_code == 3, res.output
    assert "shapes_train.rec: sha256 differs from the manifest" in res.output
    assert "To fix:" in res.output and "--skip-data-checksums" in res.output
    skipped = _launch(dataset, "--skip-data-checksums")
    assert skipped.exit_code == 0, skipped.output


def test_digests_are_cached_by_size_and_mtime(dataset):
    assert _launch(dataset).exit_code == 0
    cache = json.loads((dataset / CACHE).read_text())
    assert set(cache) == {p.name for p in dataset.iterdir() if p.suffix in (".rec", ".idx", ".lst")}
    # A change that keeps size and mtime is not re-read: the cache is what makes a launch on a
    # large dataset fast, and it is keyed exactly as documented.
    rec = dataset / "shapes_val.rec"
    st = rec.stat()
    _flip_a_byte(rec, 100)
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _launch(dataset).exit_code == 0
    os.utime(rec)  # a new mtime: read again, and caught
    res = _launch(dataset)
    assert res.exit_code == 3 and "shapes_val.rec: sha256 differs" in res.output


def test_a_read_only_dataset_is_still_verified(dataset):
    from tests.fs_faults import READ_ONLY, finetune_in

    _flip_a_byte(dataset / "shapes_train.rec", 20)
    res = finetune_in(READ_ONLY, dataset, *DRY_RUN, "--dataset", str(dataset))
    assert res.returncode == 3, res.stdout + res.stderr
    assert "shapes_train.rec: sha256 differs" in res.stderr and "Traceback" not in res.stderr
    assert not (dataset / CACHE).exists()  # no cache could be written: checked all the same


def _edit_manifest(dataset: Path, change) -> None:
    path = dataset / "manifest.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_a_manifest_from_a_newer_version_is_refused_as_such(dataset, tmp_path):
    _edit_manifest(dataset, lambda d: d.update(schema_version=2, new_thing={"x": 1}))
    res = _launch(dataset)
    assert res.exit_code == 3, res.output
    assert "schema version 2, written by a newer finetune" in res.output
    assert "reads up to version 1" in res.output and "To fix:" in res.output
    io = CliRunner().invoke(app, ["test-io", str(dataset)])
    assert io.exit_code == 3 and "newer finetune" in io.output


def test_an_unknown_field_is_named(dataset, image_folder):
    _edit_manifest(dataset, lambda d: d["params"].update(bogus=1))
    res = _launch(dataset)
    assert res.exit_code == 3, res.output
    assert "unknown field 'params.bogus'" in res.output
    # prepare into that folder says why it will not reuse or replace it
    again = CliRunner().invoke(
        app, ["prepare", "folder", str(image_folder), "--out", str(dataset), "--resize", "40"]
    )
    assert again.exit_code == 3 and "unknown field 'params.bogus'" in again.output
