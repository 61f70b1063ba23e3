"""`finetune prepare` against hostile input (issue 12): each case through the CLI, as a user
meets it -- a clear message and exit code, nothing of another dataset changed, no hang."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
import zlib
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


def test_name_with_a_path_is_refused_and_touches_nothing(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "odd")
    other = tmp_path / "dsroot" / "other"
    assert _prepare(root, other, "--name", "other").exit_code == 0
    before = {p.name: p.read_bytes() for p in other.iterdir()}
    for name in ("../../other/other", "a/b", "..", ".hidden", "x" * 101, "tab\tname"):
        res = _prepare(root, tmp_path / "dsroot" / "new", "--name", name)
        assert res.exit_code == 2, (name, res.output)
        assert "not a plain file-name stem" in res.output and "To fix:" in res.output
        assert "Traceback" not in res.output
    assert {p.name: p.read_bytes() for p in other.iterdir()} == before
    assert mf.verify(other, mf.load(other)) == []
    assert not (tmp_path / "dsroot" / "new").exists()  # refused before any work
    assert not (tmp_path / "dsroot" / "a").exists()


def test_a_fifo_is_skipped_not_waited_on(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    c1 = _classes(root)[0]
    os.mkfifo(root / c1 / "x.jpg")
    done = subprocess.run(
        [sys.executable, "-m", "finetune", "prepare", "folder", str(root), "--out",
         str(tmp_path / "o"), "--resize", "32", "--max-bad", "0.1", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    m = mf.load(tmp_path / "o")
    assert [(s.path, s.reason.split(" (")[0]) for s in m.skipped] == [
        (f"{c1}/x.jpg", "not a regular file")
    ]


def test_a_symlink_loop_class_folder_is_a_clear_error(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    os.symlink("loop", root / "loop")
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code == 3, res.output
    assert "loop (Too many levels of symbolic links)" in res.output and "To fix:" in res.output


def test_symlinked_folders_never_list_an_image_twice(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    c1, c2, c3 = classes = _classes(root)
    os.symlink(root, root / "everything")  # a class that is the root itself
    os.symlink(tmp_path, root / c1 / "outside")  # leads out of the root
    os.symlink("..", root / c2 / "up")  # a loop back to the root
    inner = root / c3 / "more"
    inner.mkdir()
    os.symlink(inner, root / c3 / "again")  # a second way to the same folder
    shutil.copy(next((root / c3).glob("*.jpg")), inner / "extra.jpg")
    res = _prepare(root, tmp_path / "o", "--json")
    assert res.exit_code == 0, res.output
    m = mf.load(tmp_path / "o")
    assert m.classes == classes
    assert m.splits["train"].count + m.splits["val"].count == 16 * 3 + 1
    ignored = {i.path: i.reason for i in m.ignored}
    assert "outside the image folder" in ignored["everything"]
    assert "outside the image folder" in ignored[f"{c1}/outside"]
    assert "outside the image folder" in ignored[f"{c2}/up"]
    twice = [d for d in ("again", "more") if "already listed" in ignored.get(f"{c3}/{d}", "")]
    assert len(twice) == 1  # one of the two ways in is walked, the other is not


def test_a_linked_class_duplicating_another_is_refused(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    os.symlink(root / _classes(root)[0], root / "009.copy")
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code == 3 and "hold no images: 009.copy" in res.output


def test_all_names_with_tabs_or_newlines_are_listed_before_encoding(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    c1, c2, _ = _classes(root)
    good = next((root / c1).glob("*.jpg"))
    for bad in ("a\tb.jpg", "c\nd.jpg", "e\tf\tg.jpg"):
        shutil.copy(good, root / c2 / bad)
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code == 3, res.output
    assert "3 image file name(s) contain a tab or line break" in res.output
    for bad in ("a\\tb.jpg", "c\\nd.jpg", "e\\tf\\tg.jpg"):
        assert bad in res.output
    assert not (tmp_path / "o").exists()  # nothing encoded, nothing written


def test_out_inside_the_image_folder_works_again_and_again(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    classes = _classes(root)
    out = root / "prepared"
    first = _prepare(root, out, "--json")
    assert first.exit_code == 0, first.output
    again = _prepare(root, out)
    assert again.exit_code == 0, again.output
    assert "Already prepared" in again.output
    assert mf.load(out).classes == classes


def test_a_single_class_is_refused_with_the_reason(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs", classes=1)
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code == 3, res.output
    assert f"only one class ({_classes(root)[0]})" in res.output and "at least two" in res.output
    assert not (tmp_path / "o").exists()


def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG that declares width x height (8-bit grey) with only a few rows of data: enough
    for an image library to see its size, which is where the limit must act."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\0" * (width + 1) * 4)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat)
    path.write_bytes(png + chunk(b"IEND", b""))


def test_a_decompression_bomb_is_skipped_with_its_reason(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    c1 = _classes(root)[0]
    _png_header_only(root / c1 / "bomb.png", 12000, 12000)
    res = _prepare(root, tmp_path / "o", "--max-bad", "0.1")
    assert res.exit_code == 0, res.output
    assert "Warning" not in res.output
    (skipped,) = mf.load(tmp_path / "o").skipped
    assert skipped.path == f"{c1}/bomb.png"
    assert "144000000 pixels" in skipped.reason and "--max-pixels" in skipped.reason


def test_max_pixels_is_an_option(image_folder, tmp_path):
    from PIL import Image

    root = _copy(image_folder, tmp_path / "imgs")
    pixels = {}
    for f in root.rglob("*.jpg"):
        with Image.open(f) as im:
            pixels[f.relative_to(root).as_posix()] = im.size[0] * im.size[1]
    limit = sorted(pixels.values())[len(pixels) // 3]
    res = _prepare(root, tmp_path / "o", "--max-pixels", str(limit), "--max-bad", "0.9")
    assert res.exit_code == 0, res.output
    m = mf.load(tmp_path / "o")
    assert m.params.max_pixels == limit
    assert {s.path for s in m.skipped} == {p for p, n in pixels.items() if n > limit}
    assert all(f"--max-pixels {limit}" in s.reason for s in m.skipped)


def test_extreme_strips_are_prepared_not_called_corrupt(image_folder, tmp_path, capfd):
    """Issue 34, item 6: valid 1 x 5,000 (and 5,000 x 1) images at --resize 40 would be
    40 x 200,000: beyond JPEG's 65,500-pixel limit, they were reported "corrupt image" and
    libjpeg's own message leaked onto stderr. Their long side is capped now."""
    from PIL import Image

    root = _copy(image_folder, tmp_path / "imgs")
    c1 = _classes(root)[0]
    Image.new("RGB", (1, 5000), (10, 200, 30)).save(root / c1 / "tall.jpg", quality=90)
    Image.new("RGB", (5000, 1), (10, 200, 30)).save(root / c1 / "wide.png")
    capfd.readouterr()
    res = _prepare(root, tmp_path / "o", "--resize", "40")
    assert res.exit_code == 0, res.output
    assert "corrupt" not in res.output
    assert mf.load(tmp_path / "o").skipped == []
    err = capfd.readouterr().err
    assert "65500" not in err and "Maximum supported image dimension" not in err, err


def test_a_class_in_two_unicode_forms_is_refused(image_folder, tmp_path):
    """Issue 34, item 6: école in NFC and in NFD were two classes that print the same."""
    import unicodedata

    root = _copy(image_folder, tmp_path / "imgs")
    c1, c2 = _classes(root)[:2]
    nfc, nfd = unicodedata.normalize("NFC", "école"), unicodedata.normalize("NFD", "école")
    (root / c1).rename(root / nfc)
    (root / c2).rename(root / nfd)
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code != 0 and "Traceback" not in res.output
    out = " ".join(res.output.split())
    assert "differ only in Unicode normalization" in out and "To fix:" in out
    assert ascii(nfc) in out and ascii(nfd) in out
    assert not (tmp_path / "o").exists()


def test_control_and_bidi_characters_in_class_names_are_refused(image_folder, tmp_path):
    root = _copy(image_folder, tmp_path / "imgs")
    c1 = _classes(root)[0]
    spoof = "cat\u202egpj.exe"  # prints as "catexe.jpg"
    (root / c1).rename(root / spoof)
    res = _prepare(root, tmp_path / "o")
    assert res.exit_code != 0 and "Traceback" not in res.output
    out = " ".join(res.output.split())
    assert "control or text-direction characters" in out and ascii(spoof) in out
    assert "\u202e" not in res.output
    (root / spoof).rename(root / "cat\x1b[31mred")
    res = _prepare(root, tmp_path / "o")
    assert "control or text-direction characters" in res.output and "\x1b" not in res.output


def test_names_that_are_not_utf8_are_refused_by_name_and_the_fix_works(image_folder, tmp_path):
    """Issue 49, item 7: a Latin-1 name on Linux (b'caf\\xe9') ended `prepare` in a
    UnicodeEncodeError traceback. Refused before anything is written, the name shown
    escaped, and the bash command the message gives renames it: then prepare works."""
    root = _copy(image_folder, tmp_path / "imgs")
    c1, c2, _ = _classes(root)
    os.rename(root / c1, os.fsencode(root) + b"/caf\xe9")
    photo = next((root / c2).glob("*.jpg"))
    os.rename(photo, os.fsencode(root / c2) + b"/ph\xf6to.jpg")
    out = tmp_path / "o"

    def prepare():
        cmd = [sys.executable, "-m", "finetune", "prepare", "folder", str(root), "--out",
               str(out), "--resize", "32", "--workers", "1"]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    for shown, escaped in (("class folder", "caf\\xe9"), ("image file", f"{c2}/ph\\xf6to.jpg")):
        res = prepare()
        assert res.returncode == 3 and "Traceback" not in res.stderr, res.stderr
        said = " ".join(res.stderr.split())
        assert f"1 {shown} name(s) are not valid UTF-8" in said and f" {escaped} " in said
        assert not out.exists()  # refused before any work
        rename = said.split("in the image folder: ")[1].split(" (convmv")[0]
        assert rename.startswith(f"mv $'{escaped}' $'"), rename
        subprocess.run(["bash", "-c", rename], cwd=root, check=True)
    res = prepare()
    assert res.returncode == 0, res.stderr
    assert "NEWNAME" in mf.load(out).classes


def test_more_workers_than_cpus_are_capped_with_a_note(image_folder, tmp_path):
    """Issue 49, item 7: `--workers 64` on a small machine forked 64 encoders without a word.
    Here the process may use one CPU: it says so and encodes in itself (one worker forks
    none), which its children under /proc, watched while it runs, show."""
    cpu = min(os.sched_getaffinity(0))
    cmd = [sys.executable, "-m", "finetune", "prepare", "folder", str(image_folder), "--out",
           str(tmp_path / "o"), "--resize", "32", "--workers", "64"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))  # fmt: skip
    most = 0
    while proc.poll() is None:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        try:
            most = max(most, len(children.read_text().split()))
        except OSError:
            break
        time.sleep(0.005)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    said = " ".join(err.split())
    assert "--workers 64 is more than the 1 CPU(s) this process may use: 1 encode" in said
    assert most == 0, most
    assert mf.load(tmp_path / "o").classes == _classes(image_folder)
