"""Our package as AWS's own PyTorch images and AMIs take it: a source tarball (SageMaker's
training toolkit unpacks it into /opt/ml/code) or a wheel (pip installs it on a Deep Learning
AMI). Both are built here from the importable package itself, so they work wherever finetune
is installed (from a wheel, editable, or a checkout), need no build tools, and are
byte-for-byte reproducible: the same code gives the same file and the same S3 key.

What travels: every file of the finetune package except bytecode caches and what is never
ours to ship (``stray``): dotfiles and dot-folders (.env, .netrc, .aws/credentials, .git) and
key or credential files a checkout's package folder may hold by accident; each one left out
is logged by name. What the image or
AMI must install next to it: our base dependencies without numpy (``runtime_requirements``):
torch there is built against the numpy it came with, and torch itself is never ours to pick.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import logging
import re
import tarfile
import zipfile
from importlib import metadata, resources
from pathlib import Path, PurePosixPath

from finetune.errors import DependencyError

PACKAGE = "finetune"
KEEP = ("numpy", "torch", "torchvision")  # what AWS's PyTorch images and AMIs own
# inside the wheel and the source tar.gz: the hashed list of the metric loggers' packages
# (written by scripts/lock.sh from the dev lock), installed in the cloud only for runs that
# name loggers
METRICS_LOCK = "finetune/backends/metrics-requirements.txt"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: fixed, so builds are reproducible
# a path part that is never shipped: a dotfile or dot-folder, a private key, a key store, a
# credentials or netrc file (the package itself has none of these)
_STRAY = re.compile(
    r"^\.|^_netrc$|^credentials(\.\w+)?$|^id_(rsa|dsa|ecdsa|ed25519)\b"
    r"|\.(pem|key|p12|pfx|jks|keystore|ppk|kdbx)$",
    re.IGNORECASE,
)

log = logging.getLogger(__name__)


def package_files() -> list[tuple[str, bytes]]:
    """(path inside an archive, content) for every file of the package, sorted by path."""
    root = Path(str(resources.files(PACKAGE)))
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        relative = path.relative_to(root).as_posix()
        if stray(relative):
            log.warning(
                "not shipping %s/%s: it looks like a secret or a stray file", root, relative
            )
            continue
        out.append((f"{PACKAGE}/{relative}", path.read_bytes()))
    return out


def stray(relative: str) -> bool:
    """Whether a path inside the package is one never to ship (a dotfile, a key file...)."""
    return any(_STRAY.search(part) for part in PurePosixPath(relative).parts)


def runtime_requirements() -> list[str]:
    """Our base (no extra) dependencies, minus what the PyTorch image or AMI owns."""
    return [r for r in _requires() if "extra ==" not in r and _name(r) not in KEEP]


def source_tarball(extra: dict[str, bytes]) -> bytes:
    """A reproducible tar.gz of the package plus ``extra`` files at its root."""
    buf = io.BytesIO()
    files = [*package_files(), *sorted(extra.items())]
    with (
        _gzip(buf) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def wheel() -> tuple[str, bytes]:
    """(file name, content) of a pure-Python wheel (PEP 427) of the installed package."""
    version = metadata.version(PACKAGE) if _requires() is not None else ""
    dist = f"{PACKAGE}-{version}.dist-info"
    files = [
        *package_files(),
        (f"{dist}/METADATA", _metadata(version).encode()),
        (
            f"{dist}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: finetune\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
    ]
    record = "".join(f"{n},sha256={_digest(d)},{len(d)}\n" for n, d in files)
    files.append((f"{dist}/RECORD", (record + f"{dist}/RECORD,,\n").encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, zipfile.ZIP_DEFLATED)
    return f"{PACKAGE}-{version}-py3-none-any.whl", buf.getvalue()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _metadata(version: str) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {PACKAGE}", f"Version: {version}"]
    meta = metadata.metadata(PACKAGE)
    python = meta.json.get("requires_python")  # (PackageMetadata's stub has no .get)
    if python:
        lines.append(f"Requires-Python: {python}")
    lines += [f"Requires-Dist: {r}" for r in _requires() if "extra ==" not in r]
    return "\n".join(lines) + "\n"


def _requires() -> list[str]:
    if not _installed():
        raise DependencyError(
            "finetune's own package metadata is missing, so its dependencies are unknown",
            "install finetune (`pip install -e .` in a checkout, or `pip install finetune`).",
        )
    return list(metadata.requires(PACKAGE) or [])


def _installed() -> bool:
    try:
        metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        return False
    return True


def name_of(requirement: str) -> str:
    """The lower-cased distribution name a requirement string starts with."""
    return _name(requirement)


def _name(requirement: str) -> str:
    for i, ch in enumerate(requirement):
        if not (ch.isalnum() or ch in "-_."):
            return requirement[:i].lower()
    return requirement.lower()


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _gzip(buf: io.BytesIO):
    return gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="")
