"""`prepare` replaces only files finetune wrote in --out, with or without --overwrite.

A folder may hold MXNet im2rec's NAME_train.rec/.idx/.lst (the very names prepare writes) or
another tool's manifest.json: those are refused, untouched. finetune's own dataset is still
replaced by --overwrite, and a prepare interrupted while publishing can be run again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from typer.testing import CliRunner

from finetune.cli import app
from finetune.data import manifest as mf
from finetune.data import outfolder

ARGS = ["--train-per-class", "10", "--resize", "32", "--workers", "1", "--name", "shapes"]


def _prepare(root: Path, out: Path, *more: str):
    return CliRunner().invoke(
        app, ["prepare", "folder", str(root), "--out", str(out), *ARGS, *more]
    )


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_im2rec_files_of_the_same_names_are_never_replaced(image_folder, tmp_path):
    out = tmp_path / "work"
    out.mkdir()
    for ext in (".rec", ".idx", ".lst"):  # what `python -m mxnet.tools.im2rec shapes ...` leaves
        (out / f"shapes_train{ext}").write_bytes(f"the user's own im2rec {ext}\n".encode())
    before = _snapshot(out)
    for more in ([], ["--overwrite"]):
        res = _prepare(image_folder, out, *more)
        assert res.exit_code == 3, res.output
        assert "shapes_train.rec, shapes_train.idx, shapes_train.lst" in res.output
        assert "which no finetune manifest there lists" in res.output and "To fix:" in res.output
        assert _snapshot(out) == before  # nothing replaced, nothing added


def test_another_tools_manifest_json_is_never_replaced(image_folder, tmp_path):
    out = tmp_path / "site"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"name": "my web app", "icons": []}))
    before = _snapshot(out)
    res = _prepare(image_folder, out, "--overwrite")
    assert res.exit_code == 3, res.output
    assert "already holds manifest.json" in res.output and "To fix:" in res.output
    assert _snapshot(out) == before


def test_own_dataset_is_replaced_and_an_interrupted_publish_rerun(image_folder, tmp_path):
    out = tmp_path / "ds"
    assert _prepare(image_folder, out).exit_code == 0
    res = _prepare(image_folder, out, "--seed", "1", "--overwrite")  # another split: replaced
    assert res.exit_code == 0, res.output
    assert mf.load(out).params.seed == 1 and mf.verify(out, mf.load(out)) == []
    # the state a prepare killed mid-publish leaves: journal written, old manifest gone
    names = list(mf.load(out).files)
    outfolder.begin(out, names)
    (out / "manifest.json").unlink()
    res = _prepare(image_folder, out, "--seed", "2")
    assert res.exit_code == 0, res.output
    assert mf.load(out).params.seed == 2 and mf.verify(out, mf.load(out)) == []
    assert not (out / outfolder.JOURNAL).exists()
    assert sorted(p.name for p in out.iterdir() if p.name != ".prepare.lock") == sorted(
        [*names, "manifest.json"]
    )
