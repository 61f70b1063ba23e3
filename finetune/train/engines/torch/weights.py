"""torchvision's ImageNet weights: found on disk, checked by digest, loaded with
``weights_only=True``; downloaded once into torch hub's cache when missing (docs/trainer.md:
where torchvision's weights come from). A file is held to the fullest digest known: the
recipe's model.weights_sha256, else the one finetune ships for torchvision's file
(digests.py), else the one recorded at its first download, else its name's 8-hex prefix. A
cached download that fails its check is fetched again; one whose server now serves another
file is refused. Your own MODEL.pth is used when named, or from a pretrained channel, never
picked up from torch hub's shared cache."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path

from finetune.contracts.engine import WeightsSource
from finetune.data.manifest import sha256_file
from finetune.download import (
    PREFIX_DIGITS,
    DigestMismatch,
    fetch,
    name_prefix,
    record,
    recorded,
)
from finetune.errors import DataError
from finetune.train.engines.torch.digests import PUBLISHED_SHA256

DOWNLOAD = "download"
MIRROR_ENV = "FINETUNE_WEIGHTS_MIRROR"
VARIANTS = ("IMAGENET1K_V2", "IMAGENET1K_V1")  # preference order when no file is named

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Found:
    path: Path
    variant: str | None  # the torchvision weights it claims to be, when its name says so
    digest: str = ""  # its sha256, once verify() has read it


def hub_dir() -> Path:
    """torch hub's checkpoint cache ($TORCH_HOME/hub/checkpoints)."""
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints"


def published(model: str) -> dict[str, str]:
    """{variant: url} of torchvision's ImageNet weights for ``model`` (installed version)."""
    from torchvision import models

    enum = models.get_model_weights(model)
    return {v: enum[v].url for v in VARIANTS if v in enum.__members__}


def is_url(weights: str) -> bool:
    return weights.startswith(("https://", "http://"))


def locate(model: str, weights: str, dirs: list[Path], sha256: str = "") -> Found:
    """The weight file for ``model``: found in ``dirs``, else downloaded into the cache
    (DataError saying what to do when that fails)."""
    names = {v: url.rsplit("/", 1)[-1] for v, url in published(model).items()}
    if weights and weights != DOWNLOAD and not is_url(weights):
        path = Path(weights).expanduser()
        if path.is_file():
            return Found(path, next((v for v, n in names.items() if n == path.name), None))
        if path.is_dir():
            raise DataError(
                f"model.weights names {path}, a folder, not a weights file",
                "name the file in it (model.weights=FOLDER/FILE.pth), or set pretrained=false.",
            )
        for directory in dirs:  # a bare file name: look for it in the search folders
            if (directory / weights).is_file():
                return Found(directory / weights, None)
        raise DataError(
            f"weights file {weights} not found (also looked in {', '.join(map(str, dirs))})",
            "give an existing file, put it in one of those folders, or set pretrained=false.",
        )
    found = find_cached(model, weights, dirs)
    url, variant = (weights, None) if is_url(weights) else _published_first(model)
    if found is None:
        return _download(url, variant, sha256)
    in_cache = found.path.parent == hub_dir() and found.path.name == url.rsplit("/", 1)[-1]
    try:
        if in_cache and not (expected(found.path, sha256)[0] or name_prefix(found.path.name)):
            raise DataError(f"{found.path} has no recorded sha256 to check it against", "")
        return _first_use(replace(found, digest=verify(found, sha256)))
    except DataError as exc:
        if not in_cache:  # a pretrained channel's copy: the job's input, not finetune's cache
            raise
        damaged = exc.what
    log.warning("%s; fetching it again from %s", damaged, url)
    try:
        return _download(url, variant, sha256)
    except DigestMismatch as exc:  # the server's file is not the one expected: its fix
        raise DigestMismatch(f"{damaged}; fetching it again: {exc.what}", exc.fix) from None
    except DataError as exc:
        raise DataError(
            f"{damaged}; fetching it again failed: {exc.what}",
            f"delete {found.path} and run again with internet access, or copy the published "
            f"{found.path.name} there.",
        ) from None


def find_cached(model: str, weights: str, dirs: list[Path]) -> Found | None:
    """The file already on disk for ``weights`` ("" / download: torchvision's published
    file, or in a pretrained channel your own MODEL[-prefix].pth; an address: its file
    name), else None. torch hub's cache is shared with other tools and users: there only a
    file by a name finetune downloads counts."""
    if is_url(weights):
        name = weights.rsplit("/", 1)[-1]
        return next((Found(d / name, None) for d in dirs if (d / name).is_file()), None)
    names = {v: url.rsplit("/", 1)[-1] for v, url in published(model).items()}
    hub = hub_dir()
    for directory in dirs:
        for variant, name in names.items():
            if (directory / name).is_file():
                return Found(directory / name, variant)
        if directory == hub or not directory.is_dir():
            continue
        own = sorted(directory.glob(f"{model}-*.pth"))  # MODEL-<sha256 prefix>.pth
        for path in [directory / f"{model}.pth", *own]:
            if path.is_file():
                return Found(path, None)
    return None


def source(model: str, weights: str, sha256: str = "", here: bool = True):
    """Where the weights of a run would come from without fetching anything (a
    finetune.contracts.engine.WeightsSource): ``here``, this machine's cache counts."""

    if weights and weights != DOWNLOAD and not is_url(weights):
        path = Path(weights).expanduser()
        if path.is_file():  # named by its path: nothing to look up (no torch, no torchvision)
            return WeightsSource(model, cached=path)
        named = locate(model, weights, [hub_dir()])  # a bare name in the cache, or DataError
        return WeightsSource(model, cached=named.path)
    found = find_cached(model, weights, [hub_dir()]) if here else None
    if found is not None:
        return WeightsSource(model, cached=found.path)
    if is_url(weights):
        url, size = weights, 0
    else:
        url, _ = _published_first(model)
        size = _published_size(model)
    dest = hub_dir() / url.rsplit("/", 1)[-1]
    pinned = sha256 or PUBLISHED_SHA256.get(dest.name, "")
    return WeightsSource(model, url=url, dest=dest, sha256=pinned, size=size, by_job=not here)


def _published_first(model: str) -> tuple[str, str]:
    """The address of the preferred published file, and its variant. FINETUNE_WEIGHTS_MIRROR
    (an address serving torchvision's files under their own names: a mirror inside a
    network without internet) replaces torchvision's host and folder."""
    published_ = published(model)
    if not published_:
        raise DataError(
            f"torchvision publishes no ImageNet weights for {model}",
            "give a weights file (model.weights=PATH or an https:// address), or set "
            "pretrained=false.",
        )
    variant, url = next(iter(published_.items()))
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if mirror:
        url = mirror.rstrip("/") + "/" + url.rsplit("/", 1)[-1]
    return url, variant


def _published_size(model: str) -> int:
    """The published file's size in bytes (torchvision's ``_file_size`` in MB), 0 unknown."""
    from torchvision import models

    enum = models.get_model_weights(model)
    for variant in VARIANTS:
        if variant in enum.__members__:
            return int(float(enum[variant].meta.get("_file_size") or 0) * 1e6)
    return 0


def expected(path: Path, sha256: str = "") -> tuple[str, str]:
    """The full sha256 ``path`` must have and what says so; ("", "") when none is known."""
    if sha256:
        return sha256.lower(), "the recipe gives (model.weights_sha256)"
    if path.name in PUBLISHED_SHA256:
        return PUBLISHED_SHA256[path.name], "torchvision's published file has"
    first = recorded(path)
    return (first, "it had at its first download") if first else ("", "")


def verify(found: Found, sha256: str = "") -> str:
    """The file's sha256, checked against the fullest digest known (``expected``), else
    against its name's hash prefix (8 hex digits at least)."""
    digest = found.digest or sha256_file(found.path)
    full, source_ = expected(found.path, sha256)
    prefix = name_prefix(found.path.name)
    if full and digest != full:
        raise DataError(
            f"{found.path} is damaged or altered: its sha256 {digest} is not the {full} {source_}",
            "delete it and copy (or download) it again; if the recipe's digest is wrong, "
            "correct model.weights_sha256.",
        )
    if not full and prefix and len(prefix) < PREFIX_DIGITS:
        raise DataError(
            f"{found.path}: the {len(prefix)} hex digits in its name ({prefix}) are too few "
            f"to check it against (torchvision's names carry {PREFIX_DIGITS})",
            "give its full sha256 as model.weights_sha256, or rename it "
            f"MODEL-<first {PREFIX_DIGITS} hex digits of its sha256>.pth.",
        )
    if not full and prefix and not digest.startswith(prefix):
        raise DataError(
            f"{found.path} is damaged or not the published file: its sha256 {digest[:12]}... "
            f"does not start with the {prefix} its name promises",
            "delete it and copy (or download) it again.",
        )
    return digest


def _first_use(found: Found) -> Found:
    """A verified cached download with no record yet (torch.hub's own, or an older
    finetune's): its digest recorded now, so any later change to it shows."""
    path = found.path
    if path.parent == hub_dir() and not expected(path)[0] and name_prefix(path.name):
        try:
            record(path, found.digest)
        except OSError as exc:  # a read-only cache still serves; the check stays the prefix
            log.warning("could not record the sha256 of %s: %s", path, exc)
    return found


def load_state(found: Found) -> dict:
    """The file's state dict, loaded without running pickled code."""
    import torch

    try:
        state = torch.load(found.path, map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling errors have many types; all mean "not weights"
        raise DataError(
            f"{found.path} is not a PyTorch state_dict file ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})",
            "use torchvision's .pth file for this model (or one saved with torch.save of a "
            "state_dict).",
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]  # a training checkpoint around the weights
    if not isinstance(state, dict) or not state:
        raise DataError(f"{found.path} holds no state_dict", "use torchvision's .pth file.")
    return state


def _download(url: str, variant: str | None, sha256: str = "") -> Found:
    dest = hub_dir() / url.rsplit("/", 1)[-1]
    log.info("downloading %s into %s", url, dest.parent)
    digest = fetch(url, dest, sha256 or PUBLISHED_SHA256.get(dest.name, ""))
    return Found(dest, variant, digest)
