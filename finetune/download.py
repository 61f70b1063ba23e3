"""Fetching one file over HTTP(S) into a cache, the way torch.hub and timm do it: streamed to a
temporary file beside the destination, hashed while it arrives, checked against the digest
the caller expects (a full sha256, or the hex prefix a published file name carries:
``resnet50-11ad3fa6.pth``), and renamed into place only when whole and verified. A cache
file therefore exists only complete and checked; an interrupted or wrong download leaves
nothing behind (the temporary file is removed) and says what to do.

``probe`` asks the server for a file's size without fetching it (a HEAD request): what a
dry-run uses to say "will be downloaded, N MB" or "cannot be downloaded from here".
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from finetune.errors import DataError

Advance = Callable[[int], None]
Progress = Callable[[str, int], Advance]
HASH_IN_NAME = re.compile(r"-([a-f0-9]{6,64})\.")  # torch.hub's check_hash convention
PROBE_TIMEOUT_S = 5.0  # a dry-run waits at most this long to learn it is offline
_NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError)


class Unreachable(Exception):
    """The server could not be asked (no network, refused, HTTP error): ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def name_prefix(url_or_name: str) -> str:
    """The sha256 prefix a published file's name promises ("" when it promises none)."""
    match = HASH_IN_NAME.search(url_or_name.rsplit("/", 1)[-1])
    return match[1] if match else ""


def probe(url: str, timeout: float = PROBE_TIMEOUT_S) -> int:
    """The size in bytes the server announces for ``url`` (0 when it gives none); Unreachable
    when it cannot be asked."""
    _check_scheme(url)
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "finetune"})
    try:
        # bandit B310 (url schemes): only http(s), checked by _check_scheme above
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # nosec B310
            return int(resp.headers.get("Content-Length") or 0)
    except urllib.error.HTTPError as exc:
        raise Unreachable(f"HTTP {exc.code} {exc.reason}") from None
    except _NETWORK_ERRORS as exc:
        raise Unreachable(str(getattr(exc, "reason", exc))) from None


def fetch(
    url: str,
    dest: Path,
    sha256: str = "",
    progress: Progress | None = None,
    timeout: float = 60,
) -> str:
    """Download ``url`` to ``dest`` (atomically) and return its sha256. ``sha256``: the full
    digest it must have; the prefix in the file name (if any) must start it too. DataError,
    with nothing left at ``dest``, when the download fails, stops short or does not match."""
    _check_scheme(url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            digest = _stream(url, out, progress, timeout)
        _check_digest(url, digest, sha256)
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return digest


def _stream(url: str, out, progress: Progress | None, timeout: float) -> str:
    h = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "finetune"})
    try:
        # bandit B310 (url schemes): only http(s), checked by fetch's _check_scheme
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # nosec B310
            total = int(resp.headers.get("Content-Length") or 0)
            advance = progress(url.rsplit("/", 1)[-1], total) if progress else None
            got = 0
            while block := resp.read(1 << 20):
                out.write(block)
                h.update(block)
                got += len(block)
                if advance:
                    advance(len(block))
    except urllib.error.HTTPError as exc:
        raise _failed(url, f"HTTP {exc.code} {exc.reason}") from None
    except http.client.IncompleteRead as exc:
        raise _failed(url, f"the connection closed after {len(exc.partial)} bytes") from None
    except _NETWORK_ERRORS as exc:
        raise _failed(url, str(getattr(exc, "reason", exc))) from None
    if total and got < total:  # urllib returns a short read silently when a link drops
        raise _failed(url, f"the connection closed after {got} of {total} bytes")
    out.flush()
    os.fsync(out.fileno())
    return h.hexdigest()


def _check_digest(url: str, digest: str, sha256: str) -> None:
    prefix = name_prefix(url)
    if sha256 and digest != sha256.lower():
        raise DataError(
            f"{url} has sha256 {digest}, not the expected {sha256.lower()}: not kept",
            "check the address (a mirror may serve another file), or correct the expected "
            "digest (model.weights_sha256).",
        )
    if prefix and not digest.startswith(prefix):
        raise DataError(
            f"{url} has sha256 {digest[:16]}..., not the {prefix}... its name promises: the "
            "file is damaged or not the published one; not kept",
            "download again; if it keeps failing, the server (or a proxy) serves another file.",
        )


def _failed(url: str, why: str) -> DataError:
    return DataError(
        f"could not download {url}: {why}; nothing was kept",
        "run the command again when the network is back (the download starts over), or put "
        "the file into the cache yourself (`finetune launch ... --dry-run` names the folder).",
    )


def _check_scheme(url: str) -> None:
    if not url.startswith(("https://", "http://")):  # no file:// or custom schemes
        raise DataError(f"{url!r} is not an http(s) address", "give an https:// address.")
