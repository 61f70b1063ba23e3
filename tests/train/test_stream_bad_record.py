"""A training record that is not an image, read by the torch engine's streaming path: the
trainer (`python -m finetune.train`, as a container runs it) fails with a message naming the
file and the record, never Pillow's "<_io.BytesIO object at 0x...>" and no traceback."""

from __future__ import annotations

import shutil

import pytest

from finetune.data import manifest as mf
from finetune.data.recordio import RecordReader, RecordWriter, pack_header, unpack_header
from finetune.files import write_atomic

from .conftest import Output, hparams, make_tree, start_trainer

pytest.importorskip("torch")


def test_a_record_that_is_not_an_image_fails_the_stream_run_clearly(tmp_path, tiny_dataset):
    ds = shutil.copytree(tiny_dataset, tmp_path / "ds")
    rec, idx = ds / "shapes_train.rec", ds / "shapes_train.idx"
    with RecordReader(rec, idx) as reader:
        records = [(key, unpack_header(reader.read_key(key))[0]) for key in reader.keys]
    with RecordWriter(rec, idx) as writer:  # framing intact, every payload text
        for key, header in records:
            writer.write(pack_header(header, b"this is not an image\n"), key=key)
    manifest = mf.load(ds)  # sealed again: the sizes and checksums match the damaged files
    for f in (rec, idx):
        manifest.files[f.name] = mf.FileEntry(sha256=mf.sha256_file(f), bytes=f.stat().st_size)
    write_atomic(ds / mf.MANIFEST, mf.dump(manifest))
    hp = hparams(engine="torch", model="resnet18", data_path="stream", loader_workers=0, epochs=1)
    root = make_tree(tmp_path / "ml", ds, hp, checkpoint_local_path=None)
    out = Output(start_trainer(root))
    assert out.finish() == 3, out.text()
    text = out.text()
    channel = root / "input" / "data" / "train" / rec.name  # the trainer reads its channel
    assert f"training failed: {channel}: record " in text, text
    assert "is not a readable image" in text and "To fix:" in text, text
    assert "object at 0x" not in text and "Traceback" not in text, text
    failure = (root / "output" / "failure").read_text()
    assert "is not a readable image" in failure and "object at 0x" not in failure
