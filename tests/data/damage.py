"""Hand damage to a prepared dataset, as a careless or hostile user would do it: edit a
record's label, move an .idx offset, cut a .rec short, break a JPEG -- and, optionally,
re-seal the manifest (new sizes and sha256) so that the checksum check cannot see it."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

from finetune.data.verify import CACHE

IR_HEADER = 24  # struct '<IfQQ' after the 8-byte part header


def copy(dataset: Path, dest: Path) -> Path:
    """A private copy of a prepared dataset (without another test's digest cache)."""
    shutil.copytree(dataset, dest, ignore=shutil.ignore_patterns(CACHE, ".prepare.lock"))
    return dest


def offsets(idx: Path) -> list[int]:
    """The .idx offsets, in file order (read here, independently of finetune's reader)."""
    return [int(line.split("\t")[1]) for line in idx.read_text().splitlines() if line.strip()]


def set_label(rec: Path, offset: int, label: float) -> None:
    """Overwrite the IRHeader label of the (unsplit) record at ``offset``."""
    with open(rec, "r+b") as f:
        f.seek(offset + 8)
        flag = struct.unpack("<I", f.read(4))[0]
        assert flag == 0, "expected a single-label record"
        f.write(struct.pack("<f", label))


def label_at(rec: Path, offset: int) -> float:
    with open(rec, "rb") as f:
        f.seek(offset + 8 + 4)
        return struct.unpack("<f", f.read(4))[0]


def move_offset(idx: Path, line: int, delta: int) -> None:
    """Add ``delta`` to the offset on ``line`` (0-based) of the .idx."""
    lines = idx.read_text().splitlines()
    key, off = lines[line].split("\t")
    lines[line] = f"{key}\t{int(off) + delta}"
    idx.write_text("\n".join(lines) + "\n")


def break_image(rec: Path, offset: int) -> None:
    """Zero the first 64 bytes of the record's JPEG (its SOI marker and headers)."""
    with open(rec, "r+b") as f:
        f.seek(offset + 8 + IR_HEADER)
        f.write(b"\0" * 64)


def reseal(dataset: Path) -> None:
    """Rewrite the manifest's size and sha256 of every listed file from the files as they
    are now (what a user who 'fixes' the checksum error by hand would do)."""
    path = dataset / "manifest.json"
    doc = json.loads(path.read_text())
    for name, entry in doc["files"].items():
        data = (dataset / name).read_bytes()
        entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    path.write_text(json.dumps(doc, indent=2))
    (dataset / CACHE).unlink(missing_ok=True)


def edit_manifest(dataset: Path, change) -> None:
    path = dataset / "manifest.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2))
