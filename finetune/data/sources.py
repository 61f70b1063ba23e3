"""Caltech-256: find, download (resumable), verify and safely extract the archive.

The archive's official home is CaltechDATA. No SHA-256 is published for it; the MD5 and
SHA-512 that dataset libraries (torchvision and others) have pinned for years are checked
instead, and the archive's SHA-256 is recorded in the dataset manifest. ``--sha256`` pins a
checksum of your own (for a mirror, or a repacked archive).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import tarfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from finetune.errors import DataError

CALTECH256_URL = "https://data.caltech.edu/records/nyy15-4j048/files/256_ObjectCategories.tar"
CALTECH256_FILE = "256_ObjectCategories.tar"
CALTECH256_DIR = "256_ObjectCategories"
CALTECH256_MD5 = "67b4f42ca05d46448c6bb8ecd2220f6d"
CALTECH256_SHA512 = (
    "c71e604fa72092f5235dfdde8821ae58d3c7ba35ee0ce81bfbf397e1061f6f89"
    "f84c7ee400049244a3bd940b63a45a3754d7a788c5d2cb3f60baee02385c665a"
)
_DONE = ".extracted"

Advance = Callable[[int], None]
Progress = Callable[[str, int], Advance]


@dataclass(frozen=True)
class Digests:
    md5: str
    sha256: str
    sha512: str


@dataclass(frozen=True)
class Resolved:
    """An image root ready to list, and where it came from (for the manifest)."""

    root: Path
    info: dict[str, str]


def digests(path: Path, advance: Advance | None = None) -> Digests:
    """MD5, SHA-256 and SHA-512 of a file in one read."""
    hs = [hashlib.md5(usedforsecurity=False), hashlib.sha256(), hashlib.sha512()]
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            for h in hs:
                h.update(block)
            if advance:
                advance(len(block))
    return Digests(*(h.hexdigest() for h in hs))


def cached_digests(path: Path, progress: Progress | None = None) -> Digests:
    """``digests`` remembered in a sidecar file keyed by size and mtime: a 1.2 GB archive is
    hashed once, not on every prepare."""
    st = path.stat()
    key = f"{st.st_size}:{st.st_mtime_ns}"
    sidecar = path.with_name(f".{path.name}.digests.json")
    try:
        saved = json.loads(sidecar.read_text())
        if saved.get("key") == key:
            return Digests(saved["md5"], saved["sha256"], saved["sha512"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        pass  # a damaged sidecar (not our JSON object): hash again
    d = digests(path, progress("verify", st.st_size) if progress else None)
    # a read-only archive location just means hashing again next time
    with contextlib.suppress(OSError):
        sidecar.write_text(json.dumps({"key": key, **d.__dict__}))
    return d


def verify_archive(path: Path, expected_sha256: str | None, progress: Progress | None) -> Digests:
    """Check the archive against ``expected_sha256`` or the published Caltech-256 digests."""
    d = cached_digests(path, progress)
    if expected_sha256:
        if d.sha256 != expected_sha256.lower():
            raise DataError(
                f"{path} has sha256 {d.sha256}, not the expected {expected_sha256}",
                "download the archive again (it may be truncated), or fix --sha256.",
            )
    elif (d.md5, d.sha512) != (CALTECH256_MD5, CALTECH256_SHA512):
        raise DataError(
            f"{path} is not the published Caltech-256 archive (md5 {d.md5}, expected "
            f"{CALTECH256_MD5}); it may be truncated or a different file",
            f"delete it and download again, or pass --sha256 {d.sha256} to accept this exact file.",
        )
    return d


def download(url: str, dest: Path, progress: Progress | None = None, timeout: float = 30) -> Path:
    """Download ``url`` to ``dest``, resuming a previous partial download (``dest.part``)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    if not url.startswith(("https://", "http://")):  # no file:// or custom schemes
        raise DataError(f"{url!r} is not an http(s) URL", "give the dataset's https URL.")
    request = urllib.request.Request(url, headers={"User-Agent": "finetune"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        # bandit B310 (url schemes): only http(s), checked above
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # nosec B310
            resumed = resp.status == 206
            total = int(resp.headers.get("Content-Length") or 0) + (have if resumed else 0)
            advance = progress("download", total) if progress else None
            if advance and resumed:
                advance(have)
            with open(part, "ab" if resumed else "wb") as f:
                while block := resp.read(1 << 20):
                    f.write(block)
                    if advance:
                        advance(len(block))
                got = f.tell()
        if total and got < total:  # urllib returns short reads silently when a link drops
            raise _offline(url, dest, f"connection closed after {got} of {total} bytes")
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing left to fetch: the part file is complete
            os.replace(part, dest)
            return dest
        raise _offline(url, dest, f"HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError) as exc:
        raise _offline(url, dest, str(getattr(exc, "reason", exc))) from None
    os.replace(part, dest)
    return dest


def _offline(url: str, dest: Path, why: str) -> DataError:
    return DataError(
        f"could not download {url}: {why}",
        f"without network, download {dest.name} elsewhere and put it at {dest} (a partial "
        f"{dest.name}.part there is resumed), or pass --source /path/to/{dest.name} or the "
        "extracted folder.",
    )


@dataclass(frozen=True)
class ExtractLimits:
    """What an archive may unpack to, checked from its headers before anything is written.

    The real Caltech-256 archive (1.2 GB, 30,607 images, the largest a few MB) is far below
    the defaults; a small .tar.gz that unpacks to gigabytes is not."""

    member_bytes: int = 100 * 2**20  # --max-extract-mb
    total_bytes: int = 4 * 2**30  # --max-extract-gb
    members: int = 200_000


def _check_limits(archive: Path, members: list[tarfile.TarInfo], limits: ExtractLimits) -> None:
    big = [m for m in members if m.size > limits.member_bytes]
    total = sum(m.size for m in members)
    what = None
    if big:
        shown = ", ".join(f"{m.name} ({m.size / 2**20:.0f} MB)" for m in big[:3])
        what = f"member(s) larger than {limits.member_bytes / 2**20:g} MB: {shown}"
        fix = "--max-extract-mb"
    elif total > limits.total_bytes:
        limit_mb = limits.total_bytes / 2**20
        what = f"{total / 2**20:.1f} MB in all, above the {limit_mb:.1f} MB limit"
        fix = "--max-extract-gb"
    if what:
        raise DataError(
            f"{archive} would unpack to {what}; nothing was extracted",
            f"use the official archive, or raise the limit with {fix} if you trust this one.",
        )


def _headers(archive: Path, tar: tarfile.TarFile, limits: ExtractLimits) -> list:
    """The archive's entries, read one header at a time: an archive of more entries than
    ``limits`` allow is refused at the first one over, before the rest is read (400,000
    empty entries used to cost 30 s and 320 MB of headers before the count was checked)."""
    members = []
    while (m := tar.next()) is not None:
        members.append(m)
        if len(members) > limits.members:
            raise DataError(
                f"{archive} would unpack to more than {limits.members} entries; nothing was "
                "extracted",
                "use the official archive, or another archive with fewer files.",
            )
    return members


def safe_extract(
    archive: Path,
    target: Path,
    progress: Progress | None = None,
    limits: ExtractLimits | None = None,
) -> Path:
    """Extract ``archive`` into ``target`` (atomically), refusing unsafe members and archives
    that would unpack to more than ``limits`` allow."""
    if (target / _DONE).exists():
        return target
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar:
            limits = limits or ExtractLimits()
            members = _headers(archive, tar, limits)
            _check_limits(archive, members, limits)
            advance = progress("extract", len(members)) if progress else None
            for m in members:
                try:
                    tar.extract(m, tmp, filter="data")  # no ../, absolute paths or outside links
                except tarfile.FilterError as exc:
                    raise DataError(
                        f"{archive} holds an unsafe entry {m.name!r}: {exc}",
                        "use the official archive; this one tries to write outside its folder.",
                    ) from None
                if advance:
                    advance(1)
    except (tarfile.TarError, EOFError, zlib.error) as exc:  # EOFError: a cut .tar.gz
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(
            f"{archive} is not a readable tar archive: {exc}", "download it again."
        ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (tmp / _DONE).touch()
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    return target


def resolve_caltech256(
    source: str | None,
    downloads: Path,
    sha256: str | None = None,
    progress: Progress | None = None,
    limits: ExtractLimits | None = None,
) -> Resolved:
    """Turn --source (None, a URL, a .tar or a folder) into an extracted image root."""
    if source and not source.startswith(("http://", "https://")):
        path = Path(source).expanduser()
        if path.is_dir():
            root = path / CALTECH256_DIR if (path / CALTECH256_DIR).is_dir() else path
            return Resolved(root, {"kind": "caltech256", "path": str(root.resolve())})
        if not path.is_file():
            raise DataError(
                f"--source {source} does not exist",
                f"pass the path of {CALTECH256_FILE}, of its extracted folder, or a URL.",
            )
        archive = path
    else:
        url = source or CALTECH256_URL
        archive = downloads / CALTECH256_FILE
        if not archive.is_file():
            download(url, archive, progress)
    d = verify_archive(archive, sha256, progress)
    target = downloads / f"caltech256-{d.sha256[:16]}"
    extracted = safe_extract(archive, target, progress, limits)
    root = extracted / CALTECH256_DIR if (extracted / CALTECH256_DIR).is_dir() else extracted
    return Resolved(
        root, {"kind": "caltech256", "archive": str(archive), "archive_sha256": d.sha256}
    )
