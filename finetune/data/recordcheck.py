"""Every record of a .rec and every .idx entry checked before a reader -- MXNet's above all --
sees a byte.

MXNet's ImageRecordIter trusts the framing: an .idx offset past the end or in the middle of a
record, or a .rec cut short, makes it abort or segfault (measured: "Segmentation fault: 11",
exit codes 255 and -6). A label outside the class count trains silently with MXNet and fails
with a raw IndexError in PyTorch. A manifest can be re-sealed by hand (or its checksums
skipped with --skip-data-checksums), so the trainer, `launch` and `test-io` walk the file
here: the magic, length and continuation flag of every part, the 4-byte alignment that
follows from them, the image header and label of every record, and that every .idx offset
is the start of a record. Only the few header bytes of each record are read (mmap), so a
gigabyte .rec is walked in well under a second once it is in the page cache.
"""

from __future__ import annotations

import bisect
import math
import mmap
import struct
from pathlib import Path

from finetune.data.recordio import _HEAD, _IR, _LEN_MASK, _MAGIC_BYTES, MAGIC, read_index
from finetune.data.safeopen import open_regular
from finetune.errors import RecordIOError

_LABEL = struct.Struct("<f")
_NEED = _IR.size + _LABEL.size  # the image header and, for a multi-label record, its first
FIX = (
    "re-create the dataset with `finetune prepare --overwrite`: its record files were changed "
    "after prepare wrote them (--skip-data-checksums does not skip this check)."
)


def check_splits(directory: Path, manifest) -> None:
    """check_split for every split a DatasetManifest lists, each against its image count."""
    for split, stats in manifest.splits.items():
        rec = directory / manifest.file_name(split, "rec")
        if stats.count or rec.exists():
            idx = directory / manifest.file_name(split, "idx")
            check_split(rec, idx, manifest.num_classes, stats.count)


def check_split(
    rec: str | Path,
    idx: str | Path | None = None,
    num_classes: int | None = None,
    count: int | None = None,
) -> int:
    """Walk every record of ``rec`` (framing, image header and, with ``num_classes``, a label
    in 0..num_classes-1) and check that every offset of ``idx`` starts a record, one entry a
    record (``count`` of them, when given: the manifest's). Returns the number of records;
    RecordIOError names the file, the record and what is wrong."""
    rec = Path(rec)
    with open_regular(rec) as f:
        size = f.seek(0, 2)
        if size == 0:
            starts: list[int] = []
        else:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                starts = _walk(mm, size, rec, num_classes)
    if count is not None and len(starts) != count:
        raise RecordIOError(
            f"{rec} holds {len(starts)} records, the manifest says {count} images", FIX
        )
    if idx is not None:
        _check_index(Path(idx), rec, size, starts)
    return len(starts)


def _walk(mm: mmap.mmap, size: int, rec: Path, num_classes: int | None) -> list[int]:
    """The byte offset of every record, in file order."""
    starts: list[int] = []
    pos = 0
    while pos < size:
        start, number = pos, len(starts)
        head = b""
        part = 0
        while True:
            where = f"{rec}: record {number} (at byte {start})"
            if pos + _HEAD.size > size:
                raise _cut(rec, where, size)
            magic, lrec = _HEAD.unpack_from(mm, pos)
            if magic != MAGIC:
                raise RecordIOError(
                    f"{where}: bad magic 0x{magic:08x} at byte {pos} (expected 0x{MAGIC:08x})",
                    FIX,
                )
            cflag, length = lrec >> 29, lrec & _LEN_MASK
            if cflag not in ((0, 1) if part == 0 else (2, 3)):
                raise RecordIOError(
                    f"{where}: part {part} at byte {pos} has continuation flag {cflag}", FIX
                )
            body = pos + _HEAD.size
            if len(head) < _NEED:  # the parts are joined with the magic between them
                head += (_MAGIC_BYTES if part else b"") + mm[body : body + min(length, _NEED)]
            pos = body + ((length + 3) & ~3)  # every part ends on a 4-byte boundary
            if pos > size:
                raise _cut(rec, where, size)
            part += 1
            if cflag in (0, 3):
                break
        _check_header(head, rec, number, start, num_classes)
        starts.append(start)
    return starts


def _cut(rec: Path, where: str, size: int) -> RecordIOError:
    return RecordIOError(f"{where} is cut short: {rec.name} ends at byte {size}", FIX)


def _check_header(head: bytes, rec: Path, number: int, start: int, num_classes: int | None) -> None:
    if len(head) < _IR.size:
        raise RecordIOError(
            f"{rec}: record {number} (at byte {start}) has {len(head)} bytes, too short for "
            f"an image header ({_IR.size} bytes)",
            FIX,
        )
    flag, label, rid, _ = _IR.unpack_from(head)
    where = f"{rec}: record {number} (id {rid}, at byte {start})"
    if flag > 0:
        if len(head) < _NEED:
            raise RecordIOError(f"{where}: its header announces {flag} labels; none follow", FIX)
        (label,) = _LABEL.unpack_from(head, _IR.size)  # the class is the first label
    if num_classes is None:
        return
    if not (math.isfinite(label) and label == int(label) and 0 <= label < num_classes):
        raise RecordIOError(
            f"{where} has label {label:g}, outside the dataset's {num_classes} classes "
            f"(labels 0 to {num_classes - 1})",
            FIX,
        )


def _check_index(idx: Path, rec: Path, size: int, starts: list[int]) -> None:
    """Every .idx offset must be the start of a record (read_index refuses bad lines and
    offsets past the end)."""
    index = read_index(idx, size)
    if len(index) != len(starts):
        raise RecordIOError(
            f"{idx} lists {len(index)} records, {rec.name} holds {len(starts)}", FIX
        )
    known = set(starts)
    for key, offset in index.items():
        if offset in known:
            continue
        inside = bisect.bisect_right(starts, offset) - 1
        if inside < 0:  # (a negative offset)
            raise RecordIOError(f"{idx}: key {key} points at byte {offset}", FIX)
        raise RecordIOError(
            f"{idx}: key {key} points at byte {offset}, in the middle of record {inside} of "
            f"{rec.name} (which starts at byte {starts[inside]}), not at the start of a record",
            FIX,
        )
