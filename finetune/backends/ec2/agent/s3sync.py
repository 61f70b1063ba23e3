"""The run's S3 prefix as the agent sees it: downloads at start, uploads at a steady cadence.

Uploads skip files that did not change since the last upload (size and mtime), so a cadence
of seconds costs little. Checkpoints are mirrored like SageMaker does it: new files go up,
files deleted locally (pruned old checkpoints) are deleted in S3 after the new ones are up,
and inside each folder a file named COMPLETE goes last, so a copy torn by a kill is
recognisably incomplete. Dot-named entries (a checkpoint being written) are never uploaded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from finetune.backends.ec2.agent import protocol as p

COMPLETE_MARKER = "COMPLETE"


class UnsafeKey(ValueError):
    """An S3 key that would land outside the folder it is downloaded into."""


def contained(dest: Path, relative: str, key: str) -> Path:
    """``dest / relative``, refusing keys that climb out of ``dest``: an empty name, a
    leading ``/``, ``.`` or ``..`` components, backslashes or NUL, or a path that resolves
    (symbolic links followed) outside ``dest``. Whoever can write the run's prefix must not
    be able to make the agent overwrite files elsewhere on the instance."""
    parts = relative.split("/")
    odd = not relative or relative.startswith("/") or "\\" in relative or "\0" in relative
    if odd or any(part in ("", ".", "..") for part in parts):
        raise UnsafeKey(f"refusing S3 key {key!r}: it does not name a file inside {dest}")
    base = dest.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base) or target == base:
        raise UnsafeKey(f"refusing S3 key {key!r}: it resolves outside {dest}")
    return target


class RunStore:
    """Reads and writes one run's objects under ``s3://bucket/prefix``."""

    def __init__(self, s3, bucket: str, prefix: str) -> None:
        self.s3, self.bucket, self.prefix = s3, bucket, prefix
        self._sent: dict[str, tuple[int, int]] = {}  # key -> (size, mtime_ns) uploaded

    def read_text(self, name: str) -> str | None:
        """The object ``prefix/name`` as text, or None when it does not exist."""
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"]
        except self.s3.exceptions.NoSuchKey:
            return None
        return body.read().decode("utf-8", "replace")

    def write_text(self, name: str, text: str, content_type: str = "text/plain") -> None:
        self.s3.put_object(
            Bucket=self.bucket, Key=self.prefix + name, Body=text.encode(), ContentType=content_type
        )

    def write_status(self, state: str, key: str = p.STATUS, **fields) -> dict:
        """Replace status.json (one small PUT: readers never see half of it)."""
        doc = {"state": state, "updated_at": time.time(), **fields}
        self.write_text(key, json.dumps(doc), "application/json")
        return doc

    def keys(self, sub: str, bucket: str | None = None, prefix: str | None = None) -> list[str]:
        """Every key below ``prefix/sub`` (the run's prefix unless given)."""
        base = (self.prefix if prefix is None else prefix) + sub
        paginator = self.s3.get_paginator("list_objects_v2")
        out: list[str] = []
        for page in paginator.paginate(Bucket=bucket or self.bucket, Prefix=base):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return out

    def download_tree(self, sub: str, dest: Path) -> int:
        """Copy ``prefix/sub`` into ``dest`` (relative paths kept); returns the file count.
        Every key is checked before anything is written (see ``contained``)."""
        count = 0
        # "folder" markers (keys ending in /, as the S3 console makes them) hold no file
        keys = [k for k in self.keys(sub) if not k.endswith("/")]
        targets = [contained(dest, key[len(self.prefix + sub) :], key) for key in keys]
        for key, target in zip(keys, targets, strict=True):
            target.parent.mkdir(parents=True, exist_ok=True)
            self.s3.download_file(self.bucket, key, str(target))
            st = target.stat()
            self._sent[key] = (st.st_size, st.st_mtime_ns)  # already there: no re-upload
            count += 1
        return count

    def upload_file(self, path: Path, name: str) -> bool:
        """Upload ``path`` to ``prefix/name`` unless unchanged since the last upload."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return False
        key = self.prefix + name
        if self._sent.get(key) == (st.st_size, st.st_mtime_ns):
            return False
        self.s3.upload_file(str(path), self.bucket, key)
        self._sent[key] = (st.st_size, st.st_mtime_ns)
        return True

    def upload_tree(self, local: Path, sub: str) -> int:
        """Upload the files under ``local`` to ``prefix/sub`` (COMPLETE markers last)."""
        sent = 0
        for path in _files_in_upload_order(local):
            try:
                sent += self.upload_file(path, sub + path.relative_to(local).as_posix())
            except FileNotFoundError:
                continue  # pruned by the trainer while we were uploading: it is gone anyway
        return sent

    def mirror_tree(self, local: Path, sub: str) -> None:
        """Upload new files, then delete keys whose local file is gone (SageMaker semantics)."""
        self.upload_tree(local, sub)
        present = {sub + f.relative_to(local).as_posix() for f in _files_in_upload_order(local)}
        stale = [k for k in self.keys(sub) if k[len(self.prefix) :] not in present]
        for i in range(0, len(stale), 1000):
            batch = [{"Key": k} for k in stale[i : i + 1000]]
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
        for key in stale:
            self._sent.pop(key, None)


def _files_in_upload_order(root: Path) -> list[Path]:
    """Regular files under ``root`` without dot-named parts; COMPLETE markers at the end."""
    if not root.is_dir():
        return []
    files = [
        f
        for f in root.rglob("*")
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(root).parts)
    ]
    return sorted(files, key=lambda f: (f.name == COMPLETE_MARKER, f.as_posix()))
