"""The prepared dataset the channels carry, checked against the hyperparameters.

Both channels usually point at the same prepared folder (manifest.json + NAME_train.rec/.idx
+ NAME_val.rec/.idx), but each may hold only its own split. The manifest travels with the
data, so a wrong folder, a stale plan or a half-copied file is caught here, before training.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from finetune.contracts.hparams import TrainHyperparameters
from finetune.data import manifest as mf
from finetune.data.recordcheck import check_split
from finetune.errors import DataError

_REPLAN = "plan the run again against this dataset (`finetune launch` reads its manifest)."


@dataclass(frozen=True)
class DatasetFiles:
    """The record files of both splits and the manifest that describes them."""

    manifest: mf.DatasetManifest
    train_rec: Path
    train_idx: Path
    val_rec: Path
    val_idx: Path
    test_rec: Path | None = None  # the held-out test split, when prepared with one
    test_idx: Path | None = None

    @property
    def classes(self) -> list[str]:
        return self.manifest.classes

    @property
    def train_count(self) -> int:
        return self.manifest.splits["train"].count


def resolve(train_dir: Path, val_dir: Path, hp: TrainHyperparameters) -> DatasetFiles:
    """Find and check the train and val record files; DataError says what does not match."""
    manifest = _load(train_dir, "train")
    if (val_dir / mf.MANIFEST).is_file():
        other = _load(val_dir, "validation")
        if (other.name, other.classes) != (manifest.name, manifest.classes):
            raise DataError(
                f"the train and validation channels hold different datasets: "
                f"{manifest.name!r} ({manifest.num_classes} classes) vs "
                f"{other.name!r} ({other.num_classes} classes)",
                "point both channels at the same prepared dataset.",
            )
    _check_hparams(manifest, hp)
    train_rec, train_idx = _split_files(train_dir, manifest, "train", "train")
    val_rec, val_idx = _split_files(val_dir, manifest, "val", "validation")
    test_rec = test_idx = None
    if manifest.splits.get("test") and manifest.splits["test"].count > 0:
        # the test split travels in either channel's folder (both usually hold everything)
        where = next(
            (d for d in (train_dir, val_dir) if (d / manifest.file_name("test", "rec")).is_file()),
            None,
        )
        if where is not None:
            test_rec, test_idx = _split_files(where, manifest, "test", "train")
    files = DatasetFiles(manifest, train_rec, train_idx, val_rec, val_idx, test_rec, test_idx)
    _check_digests(files, hp.dataset_manifest_sha256, (train_dir, val_dir))
    _check_records(files)
    return files


def _check_digests(files: DatasetFiles, manifest_sha: str, channels: tuple[Path, ...]) -> None:
    """The channels' manifest is the one `launch` planned with (its sha256 travels in the
    hyperparameters, which only the launch writes) and every record file has the sha256 that
    manifest lists: a dataset in S3 may have been rewritten since by anyone who can write
    there, sizes and all. Skipped when the hyperparameters carry no digest (a hand-made job)."""
    if not manifest_sha:
        return
    for directory in dict.fromkeys(channels):
        if (directory / mf.MANIFEST).is_file() and mf.sha256_file(
            directory / mf.MANIFEST
        ) != manifest_sha:
            raise DataError(
                f"{directory / mf.MANIFEST} is not the manifest this run was planned with "
                "(its sha256 differs): the dataset was changed after launch",
                "launch again from the prepared folder (finetune uploads it anew), or plan "
                "the run again against the dataset as it is now.",
            )
    paths = [files.train_rec, files.train_idx, files.val_rec, files.val_idx]
    paths += [p for p in (files.test_rec, files.test_idx) if p is not None]
    for path in paths:
        entry = files.manifest.files.get(path.name)
        if entry is None or mf.sha256_file(path) != entry.sha256:
            raise DataError(
                f"{path} does not have the sha256 its manifest lists: the file was changed "
                "after `finetune prepare`",
                "launch again from the prepared folder (finetune uploads it anew), or "
                "prepare the dataset again.",
            )


def _check_records(files: DatasetFiles) -> None:
    """Every record's framing and label, every .idx offset (finetune.data.recordcheck), before
    an engine's reader opens the files: MXNet would segfault on a bad offset and train on an
    impossible label; torch would fail on it with a raw IndexError mid-run."""
    m = files.manifest
    splits = [("train", files.train_rec, files.train_idx), ("val", files.val_rec, files.val_idx)]
    if files.test_rec is not None and files.test_idx is not None:
        splits.append(("test", files.test_rec, files.test_idx))
    for split, rec, idx in splits:
        check_split(rec, idx, m.num_classes, m.splits[split].count)


def _load(directory: Path, channel: str) -> mf.DatasetManifest:
    try:
        return mf.load(directory)
    except DataError as exc:
        raise DataError(f"{channel} channel: {exc.what}", exc.fix) from None


def _check_hparams(m: mf.DatasetManifest, hp: TrainHyperparameters) -> None:
    if hp.num_classes != m.num_classes:
        raise DataError(
            f"the hyperparameters say num_classes={hp.num_classes} but dataset {m.name!r} "
            f"has {m.num_classes} classes",
            _REPLAN,
        )
    for split in ("train", "val"):
        if split not in m.splits or m.splits[split].count == 0:
            raise DataError(
                f"dataset {m.name!r} has no {split} images",
                "prepare it again with a validation share (--val-ratio or --train-per-class).",
            )
    if hp.num_training_samples != m.splits["train"].count:
        raise DataError(
            f"the hyperparameters say num_training_samples={hp.num_training_samples} but "
            f"dataset {m.name!r} has {m.splits['train'].count} training images",
            _REPLAN,
        )


def _split_files(directory: Path, m: mf.DatasetManifest, split: str, channel: str):
    paths = []
    for ext in ("rec", "idx"):
        name = m.file_name(split, ext)  # (m.name was checked to be a plain name)
        path = directory / name
        st = mf.listed_stat(directory, name)  # (a link to a regular file is fine)
        if st == f"{name}: missing":
            raise DataError(
                f"{channel} channel: {name} is missing from {directory}",
                f"copy the whole prepared folder (manifest.json and {m.name}_*.rec/.idx) "
                "into the channel.",
            )
        if isinstance(st, str):
            raise DataError(
                f"{channel} channel: {st} in {directory}",
                "copy the file again from the prepared dataset.",
            )
        entry = m.files.get(name)
        if entry is not None and st.st_size != entry.bytes:
            raise DataError(
                f"{channel} channel: {name} has {st.st_size} bytes, the manifest "
                f"says {entry.bytes} (a partial copy?)",
                "copy the file again from the prepared dataset.",
            )
        paths.append(path)
    return paths[0], paths[1]
