"""Atomic checkpoints, for any engine: its files, where the run stood, and which one is best.

Each checkpoint is a folder ``ckpt-NNNNNN`` (a sequence number) holding the engine's files
(its ``write`` callback puts them there: parameters, optimizer state, ...), ``state.json``
and, written last, ``COMPLETE`` (the byte size of every file). It is written under a
temporary name and renamed into place, so a kill at any moment leaves either the previous
checkpoints or a complete new one; a checkpoint whose files do not match its COMPLETE record
(sizes and sha256: a torn copy from S3, a damaged file) is skipped for an older one, and a
full disk while writing one removes the half-written copy and says so. The ``keep`` newest
are kept, and the best-validation one (named in ``BEST``) too: SageMaker mirrors this folder
to S3, deletions included, and the model artifact is made from the best checkpoint at the end.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from finetune.data.manifest import sha256_file
from finetune.errors import DataError
from finetune.files import fsync_dir, no_room

STATE = "state.json"
BEST = "BEST"  # the name of the best-validation checkpoint
COMPLETE = "COMPLETE"
_NAME = re.compile(r"ckpt-(\d{6})")
_TMP_PREFIX = ".tmp-ckpt-"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint on disk and its state (epoch, batch, step, tallies, events)."""

    directory: Path
    state: dict

    def path(self, name: str) -> Path:
        """One of the engine's files in this checkpoint."""
        return self.directory / name

    def check_fits(self, model: str, num_classes: int) -> None:
        """A checkpoint of another model or class count cannot continue this run."""
        saved = (self.state.get("model"), self.state.get("num_classes"))
        if saved != (model, num_classes):
            raise DataError(
                f"the checkpoint {self.directory} was written for {saved[0]} with {saved[1]} "
                f"classes, but this run trains {model} with {num_classes} classes",
                _FRESH_START.format(dir=self.directory.parent),
            )


_FRESH_START = (
    "give this run an empty checkpoint folder (a new job, or empty {dir}), or resume it "
    "with the dataset and model it was started with."
)


class CheckpointDir:
    """Saves and finds checkpoints in one folder (SageMaker's checkpoint LocalPath)."""

    def __init__(self, directory: Path, keep: int = 2) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self.skipped: list[str] = []  # the damaged or torn checkpoints latest() passed over
        self.directory.mkdir(parents=True, exist_ok=True)
        self._remove_stale_temporaries()

    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint whose files are what was written (sizes and
        sha256), or None: a damaged newest one is skipped for an older one."""
        self.skipped = []
        for seq in sorted(self._sequence_numbers(), reverse=True):
            folder = self.directory / f"ckpt-{seq:06d}"
            if _is_complete(folder, contents=True):
                return Checkpoint(folder, json.loads((folder / STATE).read_text("utf-8")))
            log.warning("skipping incomplete checkpoint %s", folder)
            self.skipped.append(folder.name)
        return None

    def best(self) -> Checkpoint | None:
        """The checkpoint named in BEST, if it is complete."""
        try:
            name = (self.directory / BEST).read_text("utf-8").strip()
        except OSError:
            return None
        folder = self.directory / name
        if not _NAME.fullmatch(name) or not _is_complete(folder):
            return None
        return Checkpoint(folder, json.loads((folder / STATE).read_text("utf-8")))

    def save(self, write: Callable[[Path], None], state: dict, best: bool = False) -> Checkpoint:
        """Write a new checkpoint atomically (``write(folder)`` puts the engine's files in
        it), mark it best if asked, and drop the old ones beyond ``keep``."""
        seq = max(self._sequence_numbers(), default=0) + 1
        final = self.directory / f"ckpt-{seq:06d}"
        tmp = self.directory / f"{_TMP_PREFIX}{seq:06d}-{os.getpid()}"
        try:
            tmp.mkdir()
            write(tmp)
            (tmp / STATE).write_text(json.dumps(state, indent=1), encoding="utf-8")
            sizes, digests = {}, {}
            for path in sorted(tmp.iterdir()):
                _fsync_file(path)
                sizes[path.name] = path.stat().st_size
                digests[path.name] = sha256_file(path)
            record = {"files": sizes, "sha256": digests}
            (tmp / COMPLETE).write_text(json.dumps(record), encoding="utf-8")
            _fsync_file(tmp / COMPLETE)
            fsync_dir(tmp)
            os.rename(tmp, final)
        except BaseException as exc:
            full = _disk_full(exc, self.directory)  # (asked before the removal frees room)
            shutil.rmtree(tmp, ignore_errors=True)  # the half-written one goes, the others stay
            if full is not None:
                raise DataError(
                    f"no space left on the disk holding the checkpoints {self.directory} while "
                    f"writing checkpoint {seq}{full}: it was not kept; the earlier checkpoints "
                    "are intact",
                    "free space on that disk (or give the run a larger volume), then resume "
                    "the run: it continues from its last complete checkpoint.",
                ) from None
            raise
        fsync_dir(self.directory)
        if best:
            marker = self.directory / f".{BEST}.tmp"
            marker.write_text(final.name + "\n", encoding="utf-8")
            _fsync_file(marker)
            os.replace(marker, self.directory / BEST)
            fsync_dir(self.directory)
        self._prune()
        return Checkpoint(final, state)

    def _sequence_numbers(self) -> list[int]:
        return [int(m[1]) for p in self.directory.iterdir() if (m := _NAME.fullmatch(p.name))]

    def _prune(self) -> None:
        """Keep the ``keep`` newest complete checkpoints; drop everything older."""
        folders = {seq: self.directory / f"ckpt-{seq:06d}" for seq in self._sequence_numbers()}
        complete = sorted((s for s, f in folders.items() if _is_complete(f)), reverse=True)
        if len(complete) < self.keep:
            return
        best = self.best()
        for seq, folder in folders.items():
            if seq < complete[self.keep - 1] and (best is None or folder != best.directory):
                shutil.rmtree(folder, ignore_errors=True)

    def _remove_stale_temporaries(self) -> None:
        """Temporaries of a killed earlier process (this container restarted)."""
        for p in self.directory.glob(f"{_TMP_PREFIX}*"):
            if not p.name.endswith(f"-{os.getpid()}"):
                shutil.rmtree(p, ignore_errors=True)


def _disk_full(exc: BaseException, directory: Path) -> str | None:
    """'' or ' (the engine said: ...)' when ``exc`` is a full disk, else None. An engine's own
    writer loses the errno: torch's says "[enforce fail at inline_container.cc] ... file write
    failed" (a RuntimeError), so a failed write on a file system left full is one too."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ""
    if not isinstance(exc, Exception) or not no_room(directory):
        return None
    said = " ".join(str(exc).split())
    return f" (the disk is full; the engine said: {said[:200]})"


def _is_complete(folder: Path, contents: bool = False) -> bool:
    """Every file its COMPLETE record names, of the recorded size; with ``contents``, also
    of the recorded sha256 (a damaged file of the right size: a bit flip, a bad copy)."""
    try:
        record = json.loads((folder / COMPLETE).read_text("utf-8"))
        if not all((folder / n).stat().st_size == size for n, size in record["files"].items()):
            return False
        digests = (record.get("sha256") or {}) if contents else {}
        return all(sha256_file(folder / n) == d for n, d in digests.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError, DataError):
        return False


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())
