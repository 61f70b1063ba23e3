"""`finetune predict` on a folder with bad files: as `prepare`, it skips and lists them, still
classifies every good one (exactly as when given alone), and exits non-zero.

The oracle for "still classified": each good image predicted on its own, in a separate
call, gives the same classes and probabilities as in the folder run with bad files between
them (a skipped file must not shift the records of the ones after it).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from tests.modelfolder import make_torch_model

pytest.importorskip("torch")

LIMIT = 89_478_485  # prepare's default --max-pixels (Pillow's own warning threshold)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_torch_model(tmp_path_factory.mktemp("model") / "model")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Good images (JPEG, BMP) with bad files between them in the folder's order."""
    from PIL import Image

    root = tmp_path_factory.mktemp("images") / "mixed"
    root.mkdir()
    for i, name in enumerate(["a1.jpg", "a3.jpg", "a5.bmp", "a7.png"]):
        Image.effect_noise((48, 40), 40 + 25 * i).convert("RGB").save(root / name)
    (root / "a2.jpg").write_text("not an image at all\n")
    whole = (root / "a1.jpg").read_bytes()
    (root / "a4.jpg").write_bytes(whole[: len(whole) // 2])  # cut short
    # 182 M pixels (above twice Pillow's limit) in a 22 kB file: refused from its header
    Image.new("1", (14000, 13000)).save(root / "a6.png")
    return root


GOOD = ["a1.jpg", "a3.jpg", "a5.bmp", "a7.png"]
BAD = {
    "a2.jpg": "not a readable image",
    "a4.jpg": "truncated",
    "a6.png": f"14000x13000 = 182000000 pixels, above --max-pixels {LIMIT} (raise --max-pixels",
}


def _predict(model_dir, *args: str):
    return CliRunner().invoke(app, ["predict", str(model_dir), *args, "--format", "json"])


def test_predict_skips_and_lists_bad_files_and_classifies_the_rest(model_dir, folder):
    res = _predict(model_dir, str(folder), "--top-k", "3")
    assert res.exit_code == 3, res.output
    doc = json.loads(res.stdout)
    assert [Path(p["image"]).name for p in doc["predictions"]] == GOOD
    assert {Path(s["image"]).name: s["reason"] for s in doc["skipped"]}.keys() == BAD.keys()
    for s in doc["skipped"]:
        assert BAD[Path(s["image"]).name] in s["reason"]
    for name, why in BAD.items():  # and on stderr, with the fix
        assert f"{folder / name}: " in res.stderr and why in res.stderr, res.stderr
    assert "3 of 7 files were skipped" in res.stderr and "To fix:" in res.stderr
    assert "object at 0x" not in res.output and "BytesIO" not in res.output
    for p in doc["predictions"]:  # each as it is classified alone
        alone = _predict(model_dir, str(folder / Path(p["image"]).name), "--top-k", "3")
        assert alone.exit_code == 0, alone.output
        top = json.loads(alone.stdout)["predictions"][0]["top"]
        assert [t["label"] for t in top] == [t["label"] for t in p["top"]]
        assert [t["probability"] for t in top] == pytest.approx(
            [t["probability"] for t in p["top"]]
        )


def test_predict_with_only_bad_files_fails_listing_each(model_dir, folder, tmp_path):
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    for name in BAD:
        shutil.copyfile(folder / name, only_bad / name)
    res = _predict(model_dir, str(only_bad))
    assert res.exit_code == 3 and res.stdout == "", res.output
    assert "none of the 3 files" in res.stderr and "To fix:" in res.stderr
    assert all(why in res.stderr for why in BAD.values()), res.stderr
    assert "object at 0x" not in res.output


def test_max_pixels_sets_the_limit(model_dir, folder):
    # 48 x 40 = 1920 pixels: skipped under a limit of 1919, classified at 1920
    res = _predict(model_dir, str(folder / "a1.jpg"), "--max-pixels", "1919")
    assert res.exit_code == 3, res.output
    assert "48x40 = 1920 pixels, above --max-pixels 1919" in res.stderr
    res = _predict(model_dir, str(folder / "a1.jpg"), "--max-pixels", "1920")
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["predictions"]) == 1


def test_the_top_k_table_fits_120_columns_as_one_table(model_dir, folder, tmp_path):
    deep = tmp_path / "photos-of-the-whole-family" / "holiday-2026-in-the-mountains" / "camera"
    deep.mkdir(parents=True)
    for name in GOOD:
        shutil.copyfile(folder / name, deep / f"IMG_20261120_142233_{name}")
    args = ["predict", str(model_dir), str(deep), "--top-k", "5"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == f"Images under {deep}:", res.stdout  # said once, not on every row
    assert sum(line.startswith("─") for line in lines) == 1, res.stdout  # one block
    assert max(len(line) for line in lines[1:]) <= 120, res.stdout  # the path is as long as it is
    doc = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)
    shown = [line.split() for line in lines[lines.index(next(ln for ln in lines if ln.startswith(
        "─"))) + 1:]]  # fmt: skip
    expected = []
    for p in doc["predictions"]:  # one row per class, best first, the JSON's order
        for rank, t in enumerate(p["top"], start=1):
            name = [Path(p["image"]).name] if rank == 1 else []
            expected.append([*name, str(rank), t["class"], f"{t['probability'] * 100:.1f}", "%"])
    assert shown == expected


def test_a_fifo_a_device_or_a_dangling_link_is_named_as_such(model_dir, tmp_path):
    """Issue 49, item 7: a FIFO or a device was reported as "does not exist"."""
    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    (tmp_path / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    for path, said in ((fifo, "is not a regular file (it is a FIFO (named pipe))"),
                       ("/dev/null", "is not a regular file (it is a character device)"),
                       (tmp_path / "gone.jpg", "is a link to "),
                       (tmp_path / "missing.jpg", "does not exist")):  # fmt: skip
        res = _predict(model_dir, str(path))
        assert res.exit_code == 3, res.output  # a DataError, not a traceback (exit 1)
        out = " ".join(res.output.split())
        assert f"{path} {said}" in out and "To fix:" in out, out
        assert "regular file" not in said or "does not exist" not in out, out
