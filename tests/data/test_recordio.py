"""Our pure-Python RecordIO against MXNet's own reader and writer, byte for byte."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from finetune.data.recordio import (
    MAGIC,
    IRHeader,
    RecordReader,
    RecordWriter,
    pack_header,
    read_index,
    unpack_header,
)
from finetune.errors import RecordIOError

mx = pytest.importorskip("mxnet")

M = struct.pack("<I", MAGIC)

PAYLOADS = [
    b"",
    b"a",
    b"abcd",
    b"abcde",
    M,  # the whole record is the magic: split into an empty first and last part
    M + b"xyz" + M + M + b"1234" + M,  # aligned magics back to back, and at the very end
    b"x" + M + b"yyy",  # unaligned magic: must not be split
    b"abcd" + M + b"ef",
    bytes(range(256)) * 7,
]


def _random_payloads(n: int = 40) -> list[bytes]:
    rng = random.Random(7)
    out = []
    for _ in range(n):
        parts = [rng.randbytes(rng.randrange(0, 9) * 4) for _ in range(rng.randrange(1, 4))]
        tail = rng.randbytes(rng.randrange(0, 4))
        out.append(M.join(parts) + tail)  # magics at aligned offsets
    return out


@pytest.mark.parametrize("payloads", [PAYLOADS, _random_payloads()], ids=["edge", "random"])
def test_writer_matches_mxnet_bytes(tmp_path, payloads):
    ref = mx.recordio.MXIndexedRecordIO(str(tmp_path / "m.idx"), str(tmp_path / "m.rec"), "w")
    for i, p in enumerate(payloads):
        ref.write_idx(i, p)
    ref.close()
    with RecordWriter(tmp_path / "o.rec", tmp_path / "o.idx") as w:
        for i, p in enumerate(payloads):
            w.write(p, i)
    assert (tmp_path / "o.rec").read_bytes() == (tmp_path / "m.rec").read_bytes()
    assert (tmp_path / "o.idx").read_text() == (tmp_path / "m.idx").read_text()


def test_split_record_really_split(tmp_path):
    """The payload with aligned magics is stored as several parts (cflag 1, 2, 3)."""
    with RecordWriter(tmp_path / "o.rec") as w:
        w.write(b"abcd" + M + b"efgh" + M + b"ij")
    raw = (tmp_path / "o.rec").read_bytes()
    flags = []
    pos = 0
    while pos < len(raw):
        magic, lrec = struct.unpack_from("<II", raw, pos)
        assert magic == MAGIC
        length = lrec & ((1 << 29) - 1)
        flags.append(lrec >> 29)
        pos += 8 + ((length + 3) & ~3)
    assert flags == [1, 2, 3]


@pytest.mark.parametrize("payloads", [PAYLOADS, _random_payloads()], ids=["edge", "random"])
def test_reader_reads_mxnet_files(tmp_path, payloads):
    ref = mx.recordio.MXIndexedRecordIO(str(tmp_path / "m.idx"), str(tmp_path / "m.rec"), "w")
    for i, p in enumerate(payloads):
        ref.write_idx(i * 3, p)
    ref.close()
    with RecordReader(tmp_path / "m.rec", tmp_path / "m.idx") as r:
        assert list(r) == payloads
        assert r.keys == [i * 3 for i in range(len(payloads))]
        for i in reversed(range(len(payloads))):
            assert r.read_key(i * 3) == payloads[i]


def test_mxnet_reads_our_files(tmp_path):
    payloads = PAYLOADS + _random_payloads()
    with RecordWriter(tmp_path / "o.rec", tmp_path / "o.idx") as w:
        for i, p in enumerate(payloads):
            w.write(p, i)
    ref = mx.recordio.MXIndexedRecordIO(str(tmp_path / "o.idx"), str(tmp_path / "o.rec"), "r")
    assert [ref.read_idx(i) for i in range(len(payloads))] == payloads
    ref.close()


@pytest.mark.parametrize(
    "header",
    [IRHeader(0, 3.0, 17, 0), IRHeader(0, -1.5, 2**40, 9), IRHeader(3, (1.0, 2.5, -3.0), 5, 1)],
)
def test_header_matches_mxnet_pack(header):
    mx_header = mx.recordio.IRHeader(header.flag, header.label, header.id, header.id2)
    ours = pack_header(header, b"IMG")
    assert ours == mx.recordio.pack(mx_header, b"IMG")
    back, rest = unpack_header(ours)
    mh, mrest = mx.recordio.unpack(ours)
    assert rest == mrest == b"IMG"
    assert (back.flag, back.id, back.id2) == (mh.flag, mh.id, mh.id2)
    assert np.allclose(back.label, mh.label)


def test_image_record_iter_reads_our_images(tmp_path):
    """mx.io.ImageRecordIter decodes our records with the right labels and pixels."""
    from PIL import Image

    rng = np.random.default_rng(0)
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255)]
    with RecordWriter(tmp_path / "c.rec", tmp_path / "c.idx") as w:
        for i, c in enumerate(colours):
            arr = np.full((24, 24, 3), c, np.uint8)
            arr[0, 0] = rng.integers(0, 255, 3)  # make every image distinct
            buf = _png(Image.fromarray(arr))
            w.write(pack_header(IRHeader(0, float(i), i, 0), buf), i)
    it = mx.io.ImageRecordIter(
        path_imgrec=str(tmp_path / "c.rec"),
        path_imgidx=str(tmp_path / "c.idx"),
        data_shape=(3, 24, 24),
        batch_size=5,
        shuffle=False,
        preprocess_threads=1,
    )
    batch = next(iter(it))
    labels = batch.label[0].asnumpy().tolist()
    assert labels == [0.0, 1.0, 2.0, 3.0, 4.0]
    centres = batch.data[0].asnumpy()[:, :, 12, 12]  # CHW, RGB
    assert np.allclose(centres, np.array(colours, dtype=np.float32))


def _png(img) -> bytes:
    import io

    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def test_bad_magic_is_a_clear_error(tmp_path):
    (tmp_path / "x.rec").write_bytes(b"\x00" * 16)
    with RecordReader(tmp_path / "x.rec") as r, pytest.raises(RecordIOError, match="bad magic"):
        list(r)


def test_truncated_file_is_a_clear_error(tmp_path):
    with RecordWriter(tmp_path / "t.rec") as w:
        w.write(b"x" * 100)
    data = (tmp_path / "t.rec").read_bytes()
    (tmp_path / "t.rec").write_bytes(data[:50])
    with RecordReader(tmp_path / "t.rec") as r, pytest.raises(RecordIOError, match="truncated"):
        list(r)
    (tmp_path / "t.rec").write_bytes(data[:6])
    with RecordReader(tmp_path / "t.rec") as r, pytest.raises(RecordIOError, match="truncated"):
        list(r)


def test_index_past_end_is_a_clear_error(tmp_path):
    with RecordWriter(tmp_path / "i.rec", tmp_path / "i.idx") as w:
        w.write(b"abc", 0)
    (tmp_path / "i.idx").write_text("0\t0\n1\t4096\n")
    with pytest.raises(RecordIOError, match="past the end"):
        RecordReader(tmp_path / "i.rec", tmp_path / "i.idx")
    (tmp_path / "i.idx").write_text("0 0\n")
    with pytest.raises(RecordIOError, match="key<TAB>offset"):
        read_index(tmp_path / "i.idx")


def test_missing_file_says_how_to_create_it(tmp_path):
    with pytest.raises(RecordIOError, match="finetune prepare"):
        RecordReader(tmp_path / "nope.rec")
