"""Atomic checkpoints: network parameters, optimizer state and where the run stood.

Each checkpoint is a folder ``ckpt-NNNNNN`` (a sequence number) holding ``model.params``,
``trainer.states``, ``state.json`` and, written last, ``COMPLETE`` (the byte size of every
file). It is written under a temporary name and renamed into place, so a kill at any moment
leaves either the previous checkpoints or a complete new one; a checkpoint whose files do
not match its COMPLETE record (a torn copy from S3, say) is skipped for an older one. The two
newest are kept: SageMaker mirrors this folder to S3, deletions included.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from finetune.data.manifest import fsync_dir
from finetune.errors import DataError

PARAMS = "model.params"
TRAINER = "trainer.states"
STATE = "state.json"
COMPLETE = "COMPLETE"
_NAME = re.compile(r"ckpt-(\d{6})")
_TMP_PREFIX = ".tmp-ckpt-"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint on disk and its state (epoch, batch, step, tallies, events)."""

    directory: Path
    state: dict

    @property
    def params(self) -> Path:
        return self.directory / PARAMS

    @property
    def trainer_states(self) -> Path:
        return self.directory / TRAINER

    def check_fits(self, model: str, num_classes: int) -> None:
        """A checkpoint of another model or class count cannot continue this run."""
        saved = (self.state.get("model"), self.state.get("num_classes"))
        if saved != (model, num_classes):
            raise DataError(
                f"the checkpoint {self.directory} was written for {saved[0]} with {saved[1]} "
                f"classes, but this run trains {model} with {num_classes} classes",
                _FRESH_START.format(dir=self.directory.parent),
            )

    def load_into(self, net, contexts: list) -> None:
        """The checkpoint's parameters into ``net`` (built for the same model)."""
        import mxnet as mx

        try:
            net.load_parameters(str(self.params), ctx=contexts)
        except (AssertionError, mx.base.MXNetError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(
                f"the checkpoint {self.directory} does not fit this model: {first}",
                _FRESH_START.format(dir=self.directory.parent),
            ) from None
        log.info("resumed from %s", self.directory)


_FRESH_START = (
    "give this run an empty checkpoint folder (a new job, or empty {dir}), or resume it "
    "with the dataset and model it was started with."
)


class CheckpointDir:
    """Saves and finds checkpoints in one folder (SageMaker's checkpoint LocalPath)."""

    def __init__(self, directory: Path, keep: int = 2) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self.directory.mkdir(parents=True, exist_ok=True)
        self._remove_stale_temporaries()

    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint, or None."""
        for seq in sorted(self._sequence_numbers(), reverse=True):
            folder = self.directory / f"ckpt-{seq:06d}"
            if _is_complete(folder):
                return Checkpoint(folder, json.loads((folder / STATE).read_text("utf-8")))
            log.warning("skipping incomplete checkpoint %s", folder)
        return None

    def save(self, net, trainer, state: dict) -> Checkpoint:
        """Write a new checkpoint atomically and drop the ones beyond ``keep``."""
        seq = max(self._sequence_numbers(), default=0) + 1
        final = self.directory / f"ckpt-{seq:06d}"
        tmp = self.directory / f"{_TMP_PREFIX}{seq:06d}-{os.getpid()}"
        tmp.mkdir()
        net.save_parameters(str(tmp / PARAMS))
        trainer.save_states(str(tmp / TRAINER))
        (tmp / STATE).write_text(json.dumps(state, indent=1), encoding="utf-8")
        sizes = {}
        for name in (PARAMS, TRAINER, STATE):
            _fsync_file(tmp / name)
            sizes[name] = (tmp / name).stat().st_size
        (tmp / COMPLETE).write_text(json.dumps({"files": sizes}), encoding="utf-8")
        _fsync_file(tmp / COMPLETE)
        fsync_dir(tmp)
        os.rename(tmp, final)
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
        for seq, folder in folders.items():
            if seq < complete[self.keep - 1]:
                shutil.rmtree(folder, ignore_errors=True)

    def _remove_stale_temporaries(self) -> None:
        """Temporaries of a killed earlier process (this container restarted)."""
        for p in self.directory.glob(f"{_TMP_PREFIX}*"):
            if not p.name.endswith(f"-{os.getpid()}"):
                shutil.rmtree(p, ignore_errors=True)


def _is_complete(folder: Path) -> bool:
    try:
        record = json.loads((folder / COMPLETE).read_text("utf-8"))
        return all((folder / n).stat().st_size == size for n, size in record["files"].items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())
