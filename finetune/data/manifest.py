"""The dataset manifest: the contract between `prepare` and `launch`.

``manifest.json`` is written last, after every data file is in place, so its presence means
the dataset is complete; its checksums prove that the files are the ones it describes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from finetune import __version__
from finetune.data.imaging import MAX_PIXELS
from finetune.data.safeopen import kind, open_regular, plain_name_problem
from finetune.errors import DataError

MANIFEST = "manifest.json"
SCHEMA_VERSION = 1
SPLITS = ("train", "val", "test")  # test only when `prepare` was asked to hold one out
# a dataset name becomes file names (NAME_train.rec), S3 keys and the EC2 agent's paths
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def plain_dataset_name(name: str) -> str:
    """``name`` if it is a plain dataset name (NAME_RE); ValueError (for pydantic) if not."""
    if not NAME_RE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a plain dataset name (letters, digits, '.', '_', '-'; starting "
            "with a letter or digit; at most 100 characters)"
        )
    return name


def class_name_problem(name: str) -> str | None:
    """Why a class name cannot be one (None when it can): class names come from folder names
    and are shown in terminals and written to classes.json; a manifest from S3 may carry any
    text, so no separators, no '.'/'..', no control characters (escape sequences)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        return f"class name {name!r} is empty, '.', '..' or holds a path separator"
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        return f"class name {name!r} holds a control character"
    return None


class PrepareParams(BaseModel):
    """Every option that changes the bytes `prepare` writes (workers do not)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    train_per_class: int | None = None
    val_ratio: float | None = None
    test_ratio: float | None = None
    test_per_class: int | None = None
    resize: int = 256
    quality: int = 95
    pass_through: bool = False
    exclude: tuple[str, ...] = ()
    max_bad_fraction: float = 0.05
    max_pixels: int = MAX_PIXELS


class FileEntry(BaseModel):
    sha256: str
    bytes: int


class SplitStats(BaseModel):
    count: int
    per_class: list[int]  # in label order


class Skipped(BaseModel):
    path: str
    reason: str


class DatasetManifest(BaseModel):
    """What a prepared dataset holds and how it was made."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    tool_version: str
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))
    name: str
    source: dict[str, str]
    classes: list[str]
    params: PrepareParams
    splits: dict[str, SplitStats]
    files: dict[str, FileEntry]
    skipped: list[Skipped] = []
    ignored: list[Skipped] = []

    # checked on every parse (a manifest read from disk or S3 is data anyone may have edited):
    # these names become paths that are opened, downloaded to and hashed
    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        return plain_dataset_name(name)

    @field_validator("classes")
    @classmethod
    def _plain_classes(cls, classes: list[str]) -> list[str]:
        for name in classes:
            if problem := class_name_problem(name):
                raise ValueError(problem)
        return classes

    @field_validator("files")
    @classmethod
    def _plain_file_names(cls, files: dict[str, FileEntry]) -> dict[str, FileEntry]:
        for name in files:
            if problem := plain_name_problem(name):
                raise ValueError(f"listed file {problem}")
        return files

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def file_name(self, split: str, ext: str) -> str:
        """'NAME_train.rec', 'NAME_test.idx' and friends (split: train, val or test)."""
        return f"{self.name}_{split}.{ext}"

    def identity(self) -> dict:
        """What must match for a re-run to count as the same dataset."""
        return {"name": self.name, "source": self.source, "params": self.params.model_dump()}


def load(directory: str | Path) -> DatasetManifest:
    """Read ``DIR/manifest.json``; DataError when it is missing or not a manifest."""
    path = Path(directory) / MANIFEST
    try:
        with open_regular(path) as f:  # (a FIFO named manifest.json must not hang us)
            raw = f.read()
    except FileNotFoundError:
        raise DataError(
            f"{directory} is not a prepared dataset: {MANIFEST} is missing",
            "run `finetune prepare caltech256 --out DIR` or `finetune prepare folder ROOT "
            "--out DIR` first (an interrupted prepare leaves no manifest; just run it again).",
        ) from None
    except OSError as exc:
        raise DataError(
            f"{path} cannot be read: {exc.strerror or exc}",
            "check the file's permissions (or the disk), then run again.",
        ) from None
    return parse(raw, str(path))


def parse(raw: bytes | str, where: str) -> DatasetManifest:
    """Validate a manifest's JSON: a newer schema is refused as such (not half-read), and a
    field this version does not know is named."""
    try:
        doc = json.loads(raw)
    except RecursionError:  # json nests recursively: 100k brackets are no manifest
        raise DataError(
            f"{where} is not a valid dataset manifest: JSON nested too deeply",
            "re-create the dataset with `finetune prepare`.",
        ) from None
    except ValueError as exc:
        raise DataError(
            f"{where} is not a valid dataset manifest: not JSON ({exc})",
            "re-create the dataset with `finetune prepare`.",
        ) from None
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise DataError(
            f"{where} has manifest schema version {version}, written by a newer finetune; "
            f"this one ({__version__}) reads up to version {SCHEMA_VERSION}",
            "upgrade finetune (`bash scripts/setup.sh` in an up-to-date checkout), or "
            "re-create the dataset with this version's `finetune prepare --overwrite`.",
        )
    try:
        return DatasetManifest.model_validate(doc)
    except ValidationError as exc:
        raise DataError(
            f"{where} is not a valid dataset manifest: {describe_errors(exc)}",
            "re-create the dataset with `finetune prepare` (a field this version does not "
            "know may come from another finetune version).",
        ) from None


def describe_errors(exc: ValidationError, limit: int = 5) -> str:
    """'unknown field params.bogus; field classes: Input should be a valid list' ..."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown field {loc!r}")
        else:
            parts.append(f"field {loc!r}: {err['msg']}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def sha256_file(path: str | Path) -> str:
    """sha256 of a regular file, as hex (DataError for a FIFO, a device, a folder): the one
    file digest of the package."""
    with open_regular(path) as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def verify(directory: str | Path, manifest: DatasetManifest, checksums: bool = True) -> list[str]:
    """Problems with the files the manifest lists (missing, wrong size, wrong sha256)."""
    problems = []
    for name, entry in manifest.files.items():
        path = Path(directory) / name
        st = listed_stat(directory, name)
        if isinstance(st, str):
            problems.append(st)
        elif st.st_size != entry.bytes:
            problems.append(f"{name}: {st.st_size} bytes, manifest says {entry.bytes}")
        elif checksums and sha256_file(path) != entry.sha256:
            problems.append(f"{name}: sha256 differs from the manifest")
    return problems


def listed_stat(directory: str | Path, name: str) -> os.stat_result | str:
    """The stat of a file the manifest lists that is a regular file in ``directory``; else
    the problem ("NAME: missing", "NAME: a FIFO (named pipe), not a regular file" ...).
    (The name itself was checked to be a plain file name when the manifest was parsed.)"""
    try:
        st = os.stat(Path(directory) / name)
    except FileNotFoundError:
        return f"{name}: missing"
    except OSError as exc:
        return f"{name}: cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"{name}: {kind(st.st_mode)}, not a regular file"
    return st


def dump(manifest: DatasetManifest) -> str:
    return json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n"
