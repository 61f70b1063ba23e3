"""`finetune export --overwrite` replaces only a folder an earlier export wrote, as it left it.

Every destructive case runs inside tmp_path: the current folder is a scratch copy of an
export (chdir), the home folder is one too (HOME), and '/' is refused by a path check that
is proven to refuse before the command runs at all.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib.util import find_spec
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune import files
from finetune.cli import app
from finetune.errors import UsageError
from tests.fs_faults import READ_ONLY, assert_clear_error, finetune_in
from tests.modelfolder import make_torch_model

pytest.importorskip("torch")
# looked for, not imported (~1.1 CPU-s at each test worker's collection): the export imports it
pytestmark = pytest.mark.skipif(find_spec("onnxscript") is None, reason="onnxscript not installed")

MARKER = ".finetune-export.json"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_torch_model(tmp_path_factory.mktemp("model") / "model")


@pytest.fixture(scope="module")
def exported(model_dir, tmp_path_factory) -> Path:
    """One real export; the tests copy it rather than export again (a few seconds each)."""
    out = tmp_path_factory.mktemp("reference") / "export"
    res = CliRunner().invoke(app, ["export", str(model_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _export(model_dir, out, *more: str):
    return CliRunner().invoke(app, ["export", str(model_dir), "--out", str(out), *more])


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder`` (hidden ones too) with its content's sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "/"
        for p in sorted(folder.rglob("*"))
    }


def _refused(res, code: int, *phrases: str) -> None:
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "To fix:" in res.output, res.output
    for phrase in phrases:
        assert phrase in res.output, res.output


def test_overwrite_replaces_its_own_export_and_nothing_with_other_files(
    model_dir, exported, tmp_path
):
    out = shutil.copytree(exported, tmp_path / "export")
    (out / "notes.txt").write_text("the user's own notes\n")
    before = _snapshot(tmp_path)
    _refused(_export(model_dir, out, "--overwrite"), 2, "notes.txt", "did not write")
    assert _snapshot(tmp_path) == before  # nothing deleted, nothing left behind

    (out / "notes.txt").unlink()
    (out / "classes.json").write_text('{"classes": ["edited by hand"], "image_size": 32}')
    before = _snapshot(tmp_path)
    _refused(_export(model_dir, out, "--overwrite"), 2, "classes.json", "changed since")
    assert _snapshot(tmp_path) == before

    shutil.copyfile(exported / "classes.json", out / "classes.json")  # as the export left it
    res = _export(model_dir, out, "--overwrite")
    assert res.exit_code == 0, res.output
    marker = json.loads((out / MARKER).read_text())
    assert set(marker["files"]) == {p.name for p in out.iterdir()} - {MARKER}
    assert set(marker["files"]) == {p.name for p in exported.iterdir()} - {MARKER}
    for name, entry in marker["files"].items():
        data = (out / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"])
    assert [p.name for p in tmp_path.iterdir()] == ["export"]  # no temporary or old copy left


def test_overwrite_refuses_a_folder_export_did_not_write(model_dir, tmp_path):
    out = tmp_path / "photos"
    (out / "2025").mkdir(parents=True)
    (out / "2025" / "beach.jpg").write_bytes(b"\xff\xd8 not really")
    (out / "model.onnx").write_bytes(b"the user's own model")
    before = _snapshot(tmp_path)
    _refused(_export(model_dir, out, "--overwrite"), 2, "was not written by `finetune export`")
    assert _snapshot(tmp_path) == before


def test_overwrite_never_replaces_the_current_folder(model_dir, exported, tmp_path, monkeypatch):
    here = shutil.copytree(exported, tmp_path / "work" / "here")  # an export, even
    monkeypatch.chdir(here)
    before = _snapshot(tmp_path)
    _refused(_export(model_dir, ".", "--overwrite"), 2, "is the current folder")
    _refused(_export(model_dir, str(here), "--overwrite"), 2, "is the current folder")
    _refused(_export(model_dir, "..", "--overwrite"), 2, "holds the current folder")
    assert _snapshot(tmp_path) == before


def test_overwrite_never_replaces_the_home_folder(model_dir, exported, tmp_path, monkeypatch):
    home = shutil.copytree(exported, tmp_path / "home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    assert Path("~").expanduser() == home  # the refusal below is about this scratch folder
    before = _snapshot(tmp_path)
    _refused(_export(model_dir, "~", "--overwrite"), 2, "is your home folder")
    _refused(_export(model_dir, str(home), "--overwrite"), 2, "is your home folder")
    assert _snapshot(tmp_path) == before


def test_overwrite_refuses_the_root_by_its_path_alone(model_dir, tmp_path):
    # the guard first: should it ever let '/' through, the command below is never run
    for root in (Path("/"), tmp_path / ("../" * 40), Path("/tmp/..")):
        with pytest.raises(UsageError, match="file system's root"):
            files.refuse_protected(root, "--out")
    _refused(_export(model_dir, "/", "--overwrite"), 2, "is the file system's root")


def test_export_onto_a_file_or_below_one_says_so(model_dir, tmp_path):
    mine = tmp_path / "model.onnx"
    mine.write_bytes(b"the user's own file")
    before = _snapshot(tmp_path)
    _refused(_export(model_dir, mine, "--overwrite"), 2, "is a file, not a folder")
    _refused(_export(model_dir, mine), 2, "already exists")
    _refused(_export(model_dir, mine / "export"), 3, "cannot write the export", "model.onnx")
    assert _snapshot(tmp_path) == before


def test_a_failed_export_leaves_the_old_one_as_it_was(model_dir, exported, tmp_path):
    broken = shutil.copytree(model_dir, tmp_path / "broken")
    (broken / "model.pt").write_bytes((model_dir / "model.pt").read_bytes()[:1000])
    out = shutil.copytree(exported, tmp_path / "export")
    before = _snapshot(tmp_path)
    _refused(_export(broken, out, "--overwrite"), 3, "does not load")
    assert _snapshot(tmp_path) == before  # the old export whole, no temporary left


def test_export_into_a_read_only_folder_says_so(model_dir, exported, tmp_path):
    folder = tmp_path / "ro"
    shutil.copytree(exported, folder / "export")
    before = _snapshot(tmp_path)
    res = finetune_in(READ_ONLY, folder, "export", str(model_dir), "--out", str(folder / "new"))
    assert_clear_error(res, 3, "cannot write the export", "Read-only file system")
    args = ["export", str(model_dir), "--out", str(folder / "export"), "--overwrite"]
    res = finetune_in(READ_ONLY, folder, *args)
    assert_clear_error(res, 3, "cannot write the export", "Read-only file system")
    assert _snapshot(tmp_path) == before
