"""Fetching one file over HTTP(S) into a cache, the way torch.hub and timm do it: streamed to a
temporary file beside the destination, hashed while it arrives, checked against the digest
the caller expects (a full sha256, or the 8-hex prefix a published file name carries:
``resnet50-11ad3fa6.pth``), and renamed into place only when whole and verified. Its full
sha256 is recorded beside it (``FILE.sha256``) first, so every later use -- and a fetch
that repairs it -- holds it to the digest it had when it was first downloaded. An
interrupted or wrong download leaves nothing behind and says what to do. Addresses are
https; plain http only when the full digest is known in advance or the server is this
machine (nothing crosses a network).

``probe`` asks the server for a file's size without fetching it (a HEAD request): what a
dry-run uses to say "will be downloaded, N MB" or "cannot be downloaded from here".
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import ipaddress
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from finetune.errors import DataError
from finetune.files import write_atomic

Advance = Callable[[int], None]
Progress = Callable[[str, int], Advance]
HASH_IN_NAME = re.compile(r"-([a-f0-9]{6,64})\.")  # torch.hub's check_hash convention
PREFIX_DIGITS = 8  # torchvision's names carry 8 hex digits; fewer are too weak to check
_SHA256 = re.compile(r"[0-9a-f]{64}")
PROBE_TIMEOUT_S = 5.0  # a dry-run waits at most this long to learn it is offline
_NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError)


class DigestMismatch(DataError):
    """The server answered with a file other than the one expected (nothing was kept)."""


class Unreachable(Exception):
    """The server could not be asked (no network, refused, HTTP error): ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def name_prefix(url_or_name: str) -> str:
    """The sha256 prefix a published file's name promises ("" when it promises none)."""
    match = HASH_IN_NAME.search(url_or_name.rsplit("/", 1)[-1])
    return match[1] if match else ""


def sidecar(path: Path) -> Path:
    """Where the sha256 of ``path`` is recorded when it is downloaded."""
    return path.with_name(path.name + ".sha256")


def recorded(path: Path) -> str:
    """The sha256 recorded for ``path`` at its download ("" when none, or unreadable)."""
    try:
        words = sidecar(path).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return ""
    return words[0].lower() if words and _SHA256.fullmatch(words[0].lower()) else ""


def record(path: Path, digest: str) -> None:
    """Record ``digest`` as the sha256 of ``path`` (written whole, atomically)."""
    write_atomic(sidecar(path), digest + "\n")


def probe(url: str, timeout: float = PROBE_TIMEOUT_S, sha256: str = "") -> int:
    """The size in bytes the server announces for ``url`` (0 when it gives none); Unreachable
    when it cannot be asked. ``sha256``: the full digest the file must have, if known."""
    check_address(url, sha256)
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "finetune"})
    try:
        # bandit B310 (url schemes): only http(s), checked by _check_scheme above
        with _opener(bool(sha256)).open(request, timeout=timeout) as resp:  # nosec B310
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
    """Download ``url`` to ``dest`` (atomically), record its sha256 beside it and return it.
    ``sha256``: the full digest it must have; else the one recorded when ``dest`` was first
    downloaded; the prefix in the file name (if any, 8 hex digits at least) must start it
    too. DataError, with nothing left at ``dest``, when the address is refused, or the
    download fails, stops short or does not match."""
    sha256 = sha256.lower()
    first = recorded(dest) if not sha256 else ""
    check_address(url, sha256 or first)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            digest = _stream(url, out, progress, timeout, bool(sha256 or first))
        _check_digest(url, digest, sha256)
        if first and digest != first:
            raise DigestMismatch(
                f"{url} now has sha256 {digest}, not the {first} {dest.name} had when it was "
                f"first downloaded (recorded in {sidecar(dest)}): not kept",
                "check the address (a mirror or proxy may serve another file). If the "
                f"publisher replaced the file on purpose, delete {dest} and its .sha256 file "
                "and run again to trust the new one, or pin it with model.weights_sha256.",
            )
        record(dest, digest)  # first: a file in the cache always has its digest beside it
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return digest


def _opener(full_digest_known: bool) -> urllib.request.OpenerDirector:
    """urllib's opener, whose redirects go only where _check_scheme lets a download start
    (an https server redirecting to plain http would undo the https)."""

    class Redirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            try:
                _check_scheme(newurl, full_digest_known)
            except DataError as exc:
                raise urllib.error.URLError(f"redirected to {exc.what}") from None
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(Redirects)


def _stream(url: str, out, progress: Progress | None, timeout: float, pinned: bool) -> str:
    h = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "finetune"})
    try:
        # bandit B310 (url schemes): only http(s), checked by fetch's _check_scheme
        with _opener(pinned).open(request, timeout=timeout) as resp:  # nosec B310
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


def check_address(url: str, sha256: str = "") -> None:
    """DataError (with the fix) unless ``url`` may be downloaded: http(s), plain http only
    with the full ``sha256`` known or from this machine, a name's hash prefix of 8 hex
    digits or more (or the full ``sha256``)."""
    _check_scheme(url, bool(sha256))
    _check_prefix(url, bool(sha256))


def _check_prefix(url: str, full_digest_known: bool) -> None:
    """A name's hex prefix is a promise worth checking only at 8 digits or more."""
    prefix = name_prefix(url)
    if prefix and len(prefix) < PREFIX_DIGITS and not full_digest_known:
        raise DataError(
            f"{url}: the {len(prefix)} hex digits in its name ({prefix}) are too few to check "
            f"the file against (torchvision's names carry {PREFIX_DIGITS}); not downloaded",
            "give the file's full sha256 as model.weights_sha256, or an address whose name "
            f"ends in -<first {PREFIX_DIGITS} hex digits of its sha256>.pth.",
        )


def _check_digest(url: str, digest: str, sha256: str) -> None:
    prefix = name_prefix(url)
    if sha256 and digest != sha256.lower():
        raise DigestMismatch(
            f"{url} has sha256 {digest}, not the expected {sha256.lower()}: not kept",
            "check the address (a mirror may serve another file), or correct the expected "
            "digest (model.weights_sha256).",
        )
    if prefix and not digest.startswith(prefix):
        raise DigestMismatch(
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


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (127.0.0.0/8, ::1, localhost)."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_scheme(url: str, full_digest_known: bool = False) -> None:
    """https, or plain http where nothing on the way can swap the file unnoticed: its full
    digest known in advance, or a server on this machine."""
    if not url.startswith(("https://", "http://")):  # no file:// or custom schemes
        raise DataError(f"{url!r} is not an http(s) address", "give an https:// address.")
    if url.startswith("http://") and not full_digest_known and not is_loopback(url):
        raise DataError(
            f"{url} is a plain http address: anyone on the network path could hand over "
            "another file, and nothing pins this one's full sha256; not downloaded",
            "use its https:// address (for a mirror: FINETUNE_WEIGHTS_MIRROR=https://...), or "
            "pin the file with model.weights_sha256.",
        )
