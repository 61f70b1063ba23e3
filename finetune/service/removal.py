"""`finetune runs rm` and `runs prune`: forget finished runs on this machine.

Only local things go: the run's folder under the data directory and its ledger rows.
Nothing in the cloud is touched (S3 outputs, checkpoints, images and jobs stay; `finetune
cleanup` handles cloud leftovers), and a run that may still be running is refused: its
backend is asked first, so a ledger that is merely out of date does not block a removal.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from finetune.backends import get_backend
from finetune.errors import FinetuneError, UsageError
from finetune.runs.ledger import Ledger
from finetune.runs.run import ACTIVE, Run
from finetune.service.launch import runs_dir
from finetune.service.sync import sync


@dataclass
class Removal:
    """What a removal did (or, for a dry run, would do)."""

    removed: list[str] = field(default_factory=list)  # run ids
    freed_bytes: int = 0
    kept: dict[str, str] = field(default_factory=dict)  # run id -> why it stays
    folders_left: list[str] = field(default_factory=list)  # outside the runs folder: kept


def remove(ledger: Ledger, run_ids: list[str], dry_run: bool = False) -> Removal:
    """Remove the named runs; a live one is refused (UsageError) before anything goes."""
    runs = [ledger.get(r) for r in run_ids]
    for run in runs:
        why = _live(run, ledger)
        if why:
            raise UsageError(
                f"run {run.id} is {why}: it is not removed",
                f"stop it first (`finetune runs stop {run.id}`), wait until `finetune runs "
                "show` says it ended, then remove it.",
            )
    out = Removal()
    for run in runs:
        _remove_one(ledger, run, out, dry_run)
    return out


def prune(ledger: Ledger, older_than_s: float, dry_run: bool = False) -> Removal:
    """Remove every ended run created more than ``older_than_s`` seconds ago; live runs
    are kept and listed with the reason."""
    cutoff = time.time() - older_than_s
    out = Removal()
    for run in ledger.list():
        if run.created_at is None:  # a damaged row whose age is unknown: never guessed old
            out.kept[run.id] = (
                f"its creation time is damaged, so its age is unknown; if it is of no more "
                f"use, remove it by id: `finetune runs rm {run.id}`"
            )
            continue
        if run.created_at >= cutoff:
            continue
        why = _live(run, ledger)
        if why:
            out.kept[run.id] = f"it is {why}"
        else:
            _remove_one(ledger, run, out, dry_run)
    return out


def _live(run: Run, ledger: Ledger) -> str | None:
    """Why ``run`` may still be running (its backend's answer), or None once it ended."""
    if run.status not in ACTIVE:
        return None
    try:
        run, _, _ = sync(run, get_backend(run.backend), ledger)
    except FinetuneError as exc:
        return f"{run.status} as far as the ledger knows, and its backend cannot say ({exc.what})"
    return run.status if run.status in ACTIVE else None


def _remove_one(ledger: Ledger, run: Run, out: Removal, dry_run: bool) -> None:
    folder = _own_folder(run)
    if folder is None and run.run_dir and Path(run.run_dir).exists():
        out.folders_left.append(run.run_dir)
    out.freed_bytes += _size(folder) if folder else 0
    out.removed.append(run.id)
    if dry_run:
        return
    trash = None
    if folder is not None:  # out of sight first: a crash never leaves half a run folder
        trash = folder.with_name(f".removing-{folder.name}-{os.getpid()}")
        os.rename(folder, trash)
    try:
        ledger.delete(run.id)
    except BaseException:
        if trash is not None and folder is not None:  # (trash is set only with a folder)
            os.rename(trash, folder)
        raise
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)


def _own_folder(run: Run) -> Path | None:
    """The run's folder when it is finetune's own (under the runs folder), else None:
    a path recorded in the ledger is never reason enough to delete a folder."""
    if not run.run_dir:
        return None
    folder = Path(run.run_dir)
    root = runs_dir().resolve()
    if folder.is_dir() and not folder.is_symlink() and folder.resolve().parent == root:
        return folder
    return None


def _size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            continue
    return total
