"""The reproducibility record: what a run needs to be re-run and compared.

Two halves, both plain JSON: :func:`launch_record` at launch (finetune's version and git
commit when run from a checkout, Python, the dataset manifest's sha256; the resolved recipe
and hyperparameters are in the plan beside it) goes into the ledger; the trainer adds what
only the training machine knows (the engine's framework versions, CUDA and driver, devices
actually used, a learning rate rescaled for them, and every source of nondeterminism it could
not remove) in ``run-record.json`` next to the metrics. No heavy imports here.
"""

from __future__ import annotations

import hashlib
import platform
import sys
from pathlib import Path

import finetune
from finetune.data.safeopen import open_regular
from finetune.errors import DataError

RECORD_FILE = "run-record.json"  # in /opt/ml/output/data
PACKAGE_ROOT = Path(finetune.__file__).resolve().parent


def git_commit(start: Path = PACKAGE_ROOT) -> str | None:
    """The commit of the checkout this package runs from (read from .git, no git binary);
    None for an installed wheel. A dirty tree is not detected: the record says 'checkout'."""
    for folder in (start, *start.parents):
        git = folder / ".git"
        if git.is_file():  # a worktree: "gitdir: PATH"
            text = git.read_text("utf-8").strip()
            git = Path(text.removeprefix("gitdir: ").strip())
            git = git if git.is_absolute() else folder / git
        if not git.is_dir():
            continue
        return _resolve_head(git)
    return None


def _resolve_head(git: Path) -> str | None:
    try:
        head = (git / "HEAD").read_text("utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref: "):
        return head or None
    ref = head[5:]
    common = git
    if (git / "commondir").is_file():  # worktrees keep refs in the main repository
        common = (git / (git / "commondir").read_text("utf-8").strip()).resolve()
    for base in (git, common):
        path = base / ref
        if path.is_file():
            return path.read_text("utf-8").strip()
        packed = base / "packed-refs"
        if packed.is_file():
            for line in packed.read_text("utf-8").splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
    return None


def manifest_sha256(dataset_dir: str | Path) -> str | None:
    """sha256 of a prepared dataset's manifest.json (which holds every file's sha256)."""
    try:
        with open_regular(Path(dataset_dir) / "manifest.json") as f:  # (never a FIFO: no hang)
            return hashlib.sha256(f.read()).hexdigest()
    except (OSError, DataError):
        return None


def launch_record(dataset_manifest_sha256: str | None) -> dict:
    """What the launching (or training) machine knows about the code and the data."""
    return {
        "finetune": finetune.__version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": sys.platform,
        "dataset_manifest_sha256": dataset_manifest_sha256,
    }
