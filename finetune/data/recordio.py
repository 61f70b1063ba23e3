"""MXNet RecordIO (.rec) and its index (.idx), written and read in pure Python.

The format is dmlc-core's: every record is one or more parts, each a uint32 magic
0xced7230a, a uint32 ``lrecord = cflag << 29 | length``, the bytes, and zero padding to a
multiple of 4 after the record's last part. The writer ends a part wherever the payload holds
the magic at a 4-byte-aligned offset and drops those 4 bytes (cflag 1 first part, 2 middle,
3 last; 0 for an unsplit record); the reader puts them back. An image record's payload starts
with an IRHeader ``struct '<IfQQ'`` (flag, label, id, id2); when flag > 0, ``flag`` float32
labels follow and the header's label is 0. The .idx is text, one ``key\\toffset`` line a record.
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from finetune.data.safeopen import open_regular
from finetune.errors import RecordIOError

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_HEAD = struct.Struct("<II")
_IR = struct.Struct("<IfQQ")
_LEN_MASK = (1 << 29) - 1
MAX_RECORD = 1 << 29


@dataclass(frozen=True)
class IRHeader:
    """MXNet's image-record header: flag, label (float or tuple of floats), id, id2."""

    flag: int
    label: float | tuple[float, ...]
    id: int
    id2: int = 0

    @property
    def class_label(self) -> int:
        """The class: the label, or the first of several (flag > 0)."""
        return int(self.label if isinstance(self.label, int | float) else self.label[0])


def pack_header(header: IRHeader, payload: bytes) -> bytes:
    """Prefix ``payload`` with ``header`` the way mx.recordio.pack does."""
    if isinstance(header.label, (int, float)):
        return _IR.pack(0, float(header.label), header.id, header.id2) + payload
    labels = tuple(float(x) for x in header.label)
    return (
        _IR.pack(len(labels), 0.0, header.id, header.id2)
        + struct.pack(f"<{len(labels)}f", *labels)
        + payload
    )


def unpack_header(record: bytes) -> tuple[IRHeader, bytes]:
    """Split a record into its IRHeader and the bytes after it (the encoded image)."""
    if len(record) < _IR.size:
        raise RecordIOError(
            f"record of {len(record)} bytes is too short for an image header ({_IR.size} bytes)",
            "check that this .rec holds image records (written by finetune prepare or im2rec).",
        )
    flag, label, rid, rid2 = _IR.unpack_from(record)
    rest = record[_IR.size :]
    if flag > 0:
        n = 4 * flag
        if len(rest) < n:
            raise RecordIOError(f"record {rid}: header says {flag} labels but the record is short")
        return IRHeader(flag, struct.unpack_from(f"<{flag}f", rest), rid, rid2), rest[n:]
    return IRHeader(flag, label, rid, rid2), rest


def encode_record(payload: bytes) -> bytes:
    """Return the bytes dmlc-core's RecordIOWriter writes for one record, splits included."""
    size = len(payload)
    if size >= MAX_RECORD:
        raise RecordIOError(
            f"record of {size} bytes is too large (RecordIO allows less than 2^29)",
            "resize the image (--resize) or re-encode it smaller.",
        )
    out = []
    start = 0
    aligned_end = size & ~3
    pos = payload.find(_MAGIC_BYTES, 0, aligned_end)
    while pos != -1:
        if pos % 4 == 0:
            out.append(_HEAD.pack(MAGIC, ((1 if start == 0 else 2) << 29) | (pos - start)))
            out.append(payload[start:pos])
            start = pos + 4
            pos = payload.find(_MAGIC_BYTES, start, aligned_end)
        else:
            pos = payload.find(_MAGIC_BYTES, pos + 1, aligned_end)
    out.append(_HEAD.pack(MAGIC, ((3 if start else 0) << 29) | (size - start)))
    out.append(payload[start:])
    out.append(b"\0" * (-size % 4))
    return b"".join(out)


class RecordWriter:
    """Writes a .rec (and optionally its .idx), hashing both as it goes.

    Use as a context manager; ``sha256`` and ``size`` describe the .rec once closed.
    """

    def __init__(self, rec_path: str | Path, idx_path: str | Path | None = None) -> None:
        self.rec_path = Path(rec_path)
        self.idx_path = Path(idx_path) if idx_path else None
        self._rec: BinaryIO = open(self.rec_path, "wb")  # noqa: SIM115 - closed in close()
        self._idx = open(self.idx_path, "w", encoding="ascii") if self.idx_path else None  # noqa: SIM115
        self._rec_hash = hashlib.sha256()
        self._idx_hash = hashlib.sha256()
        self.size = 0
        self.count = 0

    def write(self, payload: bytes, key: int | None = None) -> int:
        """Append one record; with an index, ``key`` is its key. Returns the record's offset."""
        offset = self.size
        data = encode_record(payload)
        self._rec.write(data)
        self._rec_hash.update(data)
        self.size += len(data)
        self.count += 1
        if self._idx is not None:
            if key is None:
                raise ValueError("a key is required when writing an index")
            line = f"{key}\t{offset}\n"
            self._idx.write(line)
            self._idx_hash.update(line.encode("ascii"))
        return offset

    @property
    def sha256(self) -> str:
        return self._rec_hash.hexdigest()

    @property
    def idx_sha256(self) -> str:
        return self._idx_hash.hexdigest()

    def close(self) -> None:
        for f in (self._rec, self._idx):
            if f is not None and not f.closed:
                f.flush()
                os.fsync(f.fileno())
                f.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RecordReader:
    """Reads records from a .rec sequentially, or by key through its .idx."""

    def __init__(self, rec_path: str | Path, idx_path: str | Path | None = None) -> None:
        self.rec_path = Path(rec_path)
        try:  # a regular file only: a FIFO or a device would block or never end
            self._f: BinaryIO = open_regular(self.rec_path)  # closed in close()
        except FileNotFoundError:
            raise RecordIOError(
                f"{self.rec_path} does not exist", "run `finetune prepare` to create it."
            ) from None
        self._size = os.fstat(self._f.fileno()).st_size
        self.index: dict[int, int] = read_index(idx_path, self._size) if idx_path else {}

    @property
    def keys(self) -> list[int]:
        return list(self.index)

    def read_at(self, offset: int) -> bytes:
        """Read the record starting at byte ``offset``."""
        self._f.seek(offset)
        record = self._read_next()
        if record is None:
            raise RecordIOError(f"{self.rec_path}: no record at offset {offset} (end of file)")
        return record

    def read_key(self, key: int) -> bytes:
        """Read the record whose .idx key is ``key``."""
        try:
            return self.read_at(self.index[key])
        except KeyError:
            raise RecordIOError(f"{self.rec_path}: key {key} is not in the index") from None

    def __iter__(self) -> Iterator[bytes]:
        self._f.seek(0)
        while (record := self._read_next()) is not None:
            yield record

    def _read_next(self) -> bytes | None:
        parts: list[bytes] = []
        while True:
            start = self._f.tell()
            head = self._f.read(_HEAD.size)
            if not head and not parts:
                return None
            if len(head) < _HEAD.size:
                raise RecordIOError(
                    f"{self.rec_path} is truncated at byte {start}: a record header is cut short",
                    "re-create the file; it was not completely written or copied.",
                )
            magic, lrec = _HEAD.unpack(head)
            if magic != MAGIC:
                raise RecordIOError(
                    f"{self.rec_path}: bad magic 0x{magic:08x} at byte {start} "
                    f"(expected 0x{MAGIC:08x}); this is not a RecordIO file or it is corrupt",
                    "re-create it with `finetune prepare`, or check the path.",
                )
            cflag, length = lrec >> 29, lrec & _LEN_MASK
            data = self._f.read((length + 3) & ~3)
            if len(data) < length:
                raise RecordIOError(
                    f"{self.rec_path} is truncated: a record at byte {start} needs {length} "
                    f"bytes, {len(data)} remain",
                    "re-create the file; it was not completely written or copied.",
                )
            parts.append(data[:length])
            if cflag in (0, 3):
                return _MAGIC_BYTES.join(parts)
            if (cflag == 1) != (len(parts) == 1):
                raise RecordIOError(f"{self.rec_path}: broken record continuation at byte {start}")

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_index(idx_path: str | Path, rec_size: int | None = None) -> dict[int, int]:
    """Parse a .idx into {key: offset}; with ``rec_size``, offsets past the end are errors."""
    index: dict[int, int] = {}
    path = Path(idx_path)
    try:
        raw = open_regular(path)
    except FileNotFoundError:
        raise RecordIOError(
            f"index {path} does not exist", "run `finetune prepare` to create it."
        ) from None
    with io.TextIOWrapper(raw, encoding="ascii", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                key_s, off_s = line.split("\t")
                key, offset = int(key_s), int(off_s)
            except ValueError:
                raise RecordIOError(
                    f"{path}:{lineno}: expected 'key<TAB>offset', got {line.strip()!r}",
                    "re-create the index with `finetune prepare`.",
                ) from None
            if rec_size is not None and offset + _HEAD.size > rec_size:
                raise RecordIOError(
                    f"{path}:{lineno}: key {key} points at byte {offset}, past the end of the "
                    f"record file ({rec_size} bytes)",
                    "the .idx and .rec do not belong together; re-create both with "
                    "`finetune prepare --overwrite`.",
                )
            index[key] = offset
    return index
