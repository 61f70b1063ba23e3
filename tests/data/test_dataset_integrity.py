"""What a run reads is checked before it is used (issue 25, items 3b, 3f, 7, 8b and 12).

A manifest is data anyone may edit: its file names must be plain names of regular files in
the dataset folder (a FIFO or /dev/zero hung `launch --dry-run`; an absolute path was read),
and its dataset name a plain stem. A .rec/.idx damaged by hand and re-sealed into the
manifest made MXNet segfault or abort in `test-io`; a label outside the classes trained
silently. Each case runs the real CLI (a subprocess where the old code could hang or crash
the interpreter) on a private copy of the tiny dataset.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from tests.data import damage

DRY_RUN = ["launch", "smoke-resnet18", "image_size=32", "batch_per_device=8", "--dry-run"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def dataset(tiny_dataset, tmp_path) -> Path:
    return damage.copy(tiny_dataset, tmp_path / "shapes")


def finetune(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """`python -m finetune ARGS` in a subprocess: a hang is a failed test, not a hung suite,
    and a segfault in MXNet is an exit code, not the end of pytest."""
    return subprocess.run(
        [sys.executable, "-m", "finetune", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


def assert_refused(res, code: int, *phrases: str) -> None:
    out = getattr(res, "stderr", None) or res.output
    rc = getattr(res, "returncode", None)
    rc = res.exit_code if rc is None else rc
    assert rc == code, f"exit {rc}\n{out}"
    for phrase in phrases:
        assert phrase in out, f"{phrase!r} not in:\n{out}"
    assert "To fix:" in out and "Traceback" not in out, out


def _list(dataset: Path, name: str, data: bytes = b"") -> None:
    """Add ``name`` to the manifest's files, with the size and sha256 of ``data``."""
    entry = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    damage.edit_manifest(dataset, lambda d: d["files"].update({name: entry}))


# ---- 3b: what a manifest names ----------------------------------------------------------


def test_a_fifo_listed_in_the_manifest_is_refused_not_read(dataset):
    os.mkfifo(dataset / "pipe")
    _list(dataset, "pipe")
    for extra in ((), ("--skip-data-checksums",)):
        res = finetune(*DRY_RUN, "--dataset", str(dataset), *extra, timeout=60)
        assert_refused(res, 3, "pipe: a FIFO (named pipe), not a regular file")
        # and no advice to skip checksums: that flag never skips this
        assert "trains on them as they are" not in res.stderr


def test_a_link_to_a_device_listed_in_the_manifest_is_refused(dataset):
    (dataset / "zero").symlink_to("/dev/zero")
    _list(dataset, "zero")
    res = finetune(*DRY_RUN, "--dataset", str(dataset), timeout=60)
    assert_refused(res, 3, "zero: a character device, not a regular file")


@pytest.mark.parametrize("kind", ["parent", "absolute", "dev-zero"])
def test_a_path_outside_the_dataset_is_never_opened(dataset, tmp_path, kind):
    """A listed path outside the folder, even with the right size and sha256: the old code
    hashed (and so accepted) any file it named, and read /dev/zero forever (its size, 0,
    matched). Now the name itself is refused, before anything is opened."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not part of any dataset\n")
    if kind == "dev-zero":
        up = "../" * (len(dataset.resolve().parts) - 1)  # from the dataset up to /
        name, data = up + "dev/zero", b""
    else:
        name = "../secret.txt" if kind == "parent" else str(secret)
        data = secret.read_bytes()
    _list(dataset, name, data)
    res = finetune(*DRY_RUN, "--dataset", str(dataset), timeout=60)
    assert_refused(res, 3, f"listed file {name!r} is not a plain file name")


def test_a_data_file_left_out_of_the_manifest_is_not_trusted_unchecked(dataset):
    """Dropping a .rec from `files` used to skip its size and sha256 checks altogether."""
    damage.edit_manifest(dataset, lambda d: d["files"].pop("shapes_train.rec"))
    res = CliRunner().invoke(app, [*DRY_RUN, "--dataset", str(dataset)])
    assert_refused(res, 3, "shapes_train.rec: not listed in the manifest")


def test_a_fifo_in_place_of_the_digest_cache_does_not_hang_a_launch(dataset):
    from finetune.data.verify import CACHE

    os.mkfifo(dataset / CACHE)
    res = finetune(*DRY_RUN, "--dataset", str(dataset), timeout=60)
    assert res.returncode == 0, res.stderr  # the files are hashed again instead


def test_a_dataset_name_that_is_not_a_plain_stem_is_refused_on_read(dataset):
    """The name becomes NAME_train.rec, S3 keys and the EC2 agent's download paths."""
    damage.edit_manifest(dataset, lambda d: d.update(name="../../x"))
    res = CliRunner().invoke(app, [*DRY_RUN, "--dataset", str(dataset)])
    assert_refused(res, 3, "'../../x' is not a plain dataset name")
    io = CliRunner().invoke(app, ["test-io", str(dataset)])
    assert_refused(io, 3, "'../../x' is not a plain dataset name")


# ---- 3f and 12: record framing ----------------------------------------------------------


def _mid_record(ds: Path) -> str:
    damage.move_offset(ds / "shapes_train.idx", 3, 12)
    return "key 3 points at byte"


def _past_end(ds: Path) -> str:
    damage.move_offset(ds / "shapes_train.idx", 5, 10**6)
    return "past the end of the record file"


def _cut_short(ds: Path) -> str:
    rec = ds / "shapes_train.rec"
    os.truncate(rec, rec.stat().st_size - 700)
    return "is cut short"


DAMAGE = {"mid-record": _mid_record, "past-the-end": _past_end, "cut-short": _cut_short}


@pytest.mark.mxnet
@pytest.mark.parametrize("how", list(DAMAGE))
def test_damaged_records_in_a_resealed_manifest_are_refused_before_mxnet_reads(dataset, how):
    """The old code: test-io segfaulted or aborted in MXNet (exit -11 / -6 / 255) and the
    dry run accepted the dataset."""
    said = DAMAGE[how](dataset)
    damage.reseal(dataset)
    io = finetune("test-io", str(dataset), "--batch-size", "8", "--data-shape", "32")
    assert_refused(io, 3, said)
    launch = finetune(*DRY_RUN, "--dataset", str(dataset))
    assert_refused(launch, 3, said, "finetune prepare")


@pytest.mark.parametrize("how", ["past-the-end", "cut-short"])
def test_size_problems_do_not_suggest_skipping_checksums(dataset, how):
    """Item 12: --skip-data-checksums skips the sha256 only, so it is not offered for a
    file whose size changed (an .idx moved past the end, a .rec cut short)."""
    DAMAGE[how](dataset)  # not re-sealed: the manifest's sizes differ
    res = CliRunner().invoke(app, [*DRY_RUN, "--dataset", str(dataset)])
    assert_refused(res, 3, "bytes, manifest says", "re-run `finetune prepare`")
    assert "trains on them as they are" not in res.output
    assert "--skip-data-checksums would not help" in res.output
    skip = ["--dataset", str(dataset), "--skip-data-checksums"]
    skipped = CliRunner().invoke(app, [*DRY_RUN, *skip])
    assert skipped.exit_code == 3  # (as said: the flag does not skip size checks)


# ---- 7: a label outside the classes ------------------------------------------------------


def test_a_label_outside_the_classes_is_refused_at_launch(dataset):
    rec = dataset / "shapes_train.rec"
    offset = damage.offsets(dataset / "shapes_train.idx")[6]
    damage.set_label(rec, offset, 8.0)  # 8 classes: labels 0-7
    skip = ["--dataset", str(dataset), "--skip-data-checksums"]
    res = CliRunner().invoke(app, [*DRY_RUN, *skip])
    assert_refused(res, 3, f"{rec}: record 6", f"at byte {offset}) has label 8", "8 classes")
    assert "does not skip this check" in res.output


# ---- 8b: test-io on an image that does not decode ---------------------------------------


@pytest.mark.mxnet
def test_test_io_names_the_record_whose_image_does_not_decode(dataset):
    """test-io measures a pass over every image, so it stops at a bad one and names it (the
    old code: a raw MXNetError traceback from inside OpenCV)."""
    rec = dataset / "shapes_train.rec"
    offset = damage.offsets(dataset / "shapes_train.idx")[5]
    damage.break_image(rec, offset)
    damage.reseal(dataset)  # (unsealed, the sha256 check names the file first)
    res = finetune("test-io", str(dataset), "--batch-size", "8", "--data-shape", "32")
    assert_refused(res, 3, f"{rec}: record 5 (key 5", "does not decode", "finetune prepare")
    assert "BytesIO" not in res.stderr  # no object reprs in a message


def test_the_record_check_reads_split_records_as_dmlc_writes_them(tmp_path):
    """A payload holding the magic at an aligned offset is written as several parts (here:
    the record id is the magic, at payload byte 8): the check joins them as the reader does,
    and still finds the label of such a record."""
    from finetune.data.recordcheck import check_split
    from finetune.data.recordio import MAGIC, IRHeader, RecordReader, RecordWriter, pack_header
    from finetune.errors import RecordIOError

    rec, idx = tmp_path / "x.rec", tmp_path / "x.idx"
    with RecordWriter(rec, idx) as w:
        for i, label in enumerate([0.0, 2.0, 1.0]):
            w.write(pack_header(IRHeader(0, label, MAGIC), b"\xff\xd8" + bytes(30 + i)), key=i)
    assert rec.read_bytes().count(MAGIC.to_bytes(4, "little")) == 6  # 2 parts a record
    with RecordReader(rec, idx) as reader:  # (what the engines' reader makes of them)
        assert all(len(reader.read_key(k)) >= 24 for k in reader.keys)
    assert check_split(rec, idx, num_classes=3, count=3) == 3
    with pytest.raises(RecordIOError, match=r"record 1 \(id 3470205706, at byte \d+\) has label 2"):
        check_split(rec, idx, num_classes=2)
