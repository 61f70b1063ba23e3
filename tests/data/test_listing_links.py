"""Links between class folders (issue 25 item 9): a class folder's images are labelled with
that class, never with the class of a link that leads into it, and when a link leaves a class
empty the error names the link -- not the innocent sibling it points at."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from typer.testing import CliRunner

from finetune.cli import app
from finetune.data import manifest as mf


def _prepare(root: Path, out: Path, *args: str):
    cmd = ["prepare", "folder", str(root), "--out", str(out), "--resize", "32", *args]
    return CliRunner().invoke(app, cmd)


def _copy(src: Path, dst: Path, classes: int = 3) -> Path:
    """The first ``classes`` class folders of ``src`` (a small, quick image set)."""
    dst.mkdir(parents=True)
    for d in sorted(src.iterdir())[:classes]:
        shutil.copytree(d, dst / d.name)
    return dst


def _classes(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def _listed(out: Path) -> list[str]:
    """Every image path the prepared .lst files hold (tab-separated, path last)."""
    return [
        line.split("\t")[-1]
        for lst in sorted(out.glob("*.lst"))
        for line in lst.read_text().splitlines()
    ]


def test_a_class_folder_linking_to_a_sibling_is_named_not_the_sibling(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    c1 = _classes(root)[0]
    os.symlink(root / c1, root / "000.alias")  # sorts before the class it points at
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code == 3, res.output
    out = " ".join(res.output.split())
    assert "1 class folder(s) hold no images: 000.alias " in out
    assert f"000.alias is a link to the class folder {c1}, whose images are listed there" in out
    assert f"hold no images: {c1}" not in out and "To fix:" in out


def test_a_link_inside_one_class_into_another_is_not_followed(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    c1, c2, c3 = _classes(root)
    os.symlink(root / c2, root / c1 / "more")  # c1 is walked first: it used to claim c2
    one = sorted((root / c3).glob("*.jpg"))[0]
    os.symlink(one, root / c1 / "borrowed.jpg")  # one image of c3, linked into c1
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code == 0, res.output
    assert f"{c1}/more: folder not followed: a link into the class folder {c2}" in res.output
    m = mf.load(tmp_path / "o")
    assert m.classes == [c1, c2, c3]
    listed = _listed(tmp_path / "o")
    assert len(listed) == 16 * 3 and len(set(listed)) == len(listed)
    assert sum(p.startswith(f"{c2}/") for p in listed) == 16  # c2 keeps every image
    assert f"{c3}/{one.name}" in listed and f"{c1}/borrowed.jpg" not in listed
    ignored = {i.path: i.reason for i in m.ignored}
    assert f"a link into the class folder {c2}" in ignored[f"{c1}/more"]
    assert f"a link to an image of the class folder {c3}" in ignored[f"{c1}/borrowed.jpg"]


def test_a_class_holding_only_a_link_to_a_sibling_names_that_link(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    c1, c2, _ = _classes(root)
    shutil.rmtree(root / c1)
    (root / c1).mkdir()
    os.symlink(Path("..") / c2, root / c1 / "same")
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code == 3, res.output
    out = " ".join(res.output.split())
    assert f"hold no images: {c1} " in out and f"hold no images: {c2}" not in out
    assert f"{c1}/same: folder not followed: a link into the class folder {c2}" in out
