"""A prepared dataset's validation records written back out as image files, for the tests
that run `finetune predict` on them and compare with the labels the records carry."""

from __future__ import annotations

from pathlib import Path

from finetune.data.recordio import RecordReader, unpack_header


def val_images(dataset: Path, folder: Path, name: str = "shapes") -> list[int]:
    """The validation records' encoded images as files in record order; their labels."""
    folder.mkdir()
    labels = []
    with RecordReader(dataset / f"{name}_val.rec", dataset / f"{name}_val.idx") as reader:
        for i, key in enumerate(reader.keys):
            header, payload = unpack_header(reader.read_key(key))
            (folder / f"{i:04d}.jpg").write_bytes(payload)
            labels.append(int(header.label))
    return labels
