"""Check a prepared dataset's files against its manifest's sha256, before a run trains on it.

A changed image byte gives an opaque decoder failure mid-run, a changed label byte trains
silently on wrong labels: `launch` checks every file. Hashing a large dataset takes seconds,
so each file's digest is remembered in DIR/.sha256-cache, keyed by its size and mtime (as
`prepare` does for the downloaded archive): unchanged files are not read again.
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path

from finetune.data import manifest as mf
from finetune.data.recordcheck import check_splits
from finetune.data.safeopen import open_regular
from finetune.errors import DataError
from finetune.files import write_atomic

CACHE = ".sha256-cache"


def check_dataset(directory: str | Path, manifest: mf.DatasetManifest, checksums: bool = True):
    """Refuse a dataset whose files do not match ``manifest`` (sizes always, sha256 unless
    ``checksums`` is False), or whose records are malformed or carry a label outside the
    classes (finetune.data.recordcheck: what would crash or silently mislead a trainer)."""
    if checksums:
        problems = verify_checksums(directory, manifest)
    else:
        problems = mf.verify(directory, manifest, checksums=False)
    for split, stats in manifest.splits.items():  # a file not listed would go unchecked
        for ext in ("rec", "idx") if stats.count else ():
            if (name := manifest.file_name(split, ext)) not in manifest.files:
                problems.append(f"{name}: not listed in the manifest (nothing to check it by)")
    if problems:
        # --skip-data-checksums skips the sha256 only: offer it only when that is all
        only_digests = all("sha256 differs" in p for p in problems)
        raise DataError(
            f"dataset {directory} does not match its manifest: {'; '.join(problems[:5])}",
            "re-run `finetune prepare` for this dataset with --overwrite"
            + (
                "; if you changed the files on purpose, `launch --skip-data-checksums` "
                "trains on them as they are."
                if only_digests
                else " (--skip-data-checksums would not help: it skips the sha256 comparison "
                "only, never a missing file, a changed size or a file that is not a regular "
                "one)."
            ),
        )
    check_splits(Path(directory), manifest)


def verify_checksums(directory: str | Path, manifest: mf.DatasetManifest) -> list[str]:
    """Problems with the files the manifest lists: missing, wrong size, wrong sha256."""
    directory = Path(directory)
    cache = _load(directory / CACHE)
    fresh: dict[str, dict] = {}
    problems = []
    for name, entry in sorted(manifest.files.items()):
        st = mf.listed_stat(directory, name)  # a FIFO or a device is never opened
        if isinstance(st, str):
            problems.append(st)
            continue
        if st.st_size != entry.bytes:
            problems.append(f"{name}: {st.st_size} bytes, manifest says {entry.bytes}")
            continue
        key = f"{st.st_size}:{st.st_mtime_ns}"
        known = cache.get(name)
        if isinstance(known, dict) and known.get("key") == key:
            digest = known.get("sha256")
        else:
            digest = mf.sha256_file(directory / name)
        fresh[name] = {"key": key, "sha256": digest}
        if digest != entry.sha256:
            problems.append(f"{name}: sha256 differs from the manifest (changed after prepare)")
    if fresh != cache:
        _save(directory / CACHE, fresh)
    return problems


def _load(path: Path) -> dict:
    try:
        with open_regular(path) as f:  # (a FIFO in its place must not hang a launch)
            data = json.loads(f.read())
    except (OSError, ValueError, RecursionError, DataError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(path: Path, cache: dict) -> None:
    """Best effort: on a read-only dataset the files are simply hashed every time."""
    with suppress(OSError):
        write_atomic(path, json.dumps(cache, indent=1, sort_keys=True))
