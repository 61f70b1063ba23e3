"""How a prepared dataset travels as SageMaker's input channels: which files go in which
channel. The S3 upload, the S3 dataset reader, the backends' requests and the /opt/ml tree
(finetune.contracts.mltree, read by finetune.train.layout) all use this one layout."""

from __future__ import annotations

from finetune.data.manifest import MANIFEST

CHANNELS = {"train": "train", "validation": "val"}  # channel -> split
RECORDIO = "application/x-recordio"


def channel_files(dataset_name: str, split: str, with_test: bool = False) -> list[str]:
    """The files of one channel. A held-out test split travels in the validation channel
    (the trainer scores it once, at the end)."""
    files = [f"{dataset_name}_{split}.rec", f"{dataset_name}_{split}.idx", MANIFEST]
    if with_test and split == "val":
        files += [f"{dataset_name}_test.rec", f"{dataset_name}_test.idx"]
    return files
