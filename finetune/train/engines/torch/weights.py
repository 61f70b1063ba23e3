"""torchvision's ImageNet weights: found on disk, checked by digest, loaded with
``weights_only=True``; downloaded once into torch hub's cache when missing (docs/trainer.md:
where torchvision's weights come from)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from finetune.contracts.engine import WeightsSource
from finetune.data.manifest import sha256_file
from finetune.download import HASH_IN_NAME, fetch
from finetune.errors import DataError

DOWNLOAD = "download"
MIRROR_ENV = "FINETUNE_WEIGHTS_MIRROR"
VARIANTS = ("IMAGENET1K_V2", "IMAGENET1K_V1")  # preference order when no file is named

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Found:
    path: Path
    variant: str | None  # the torchvision weights it claims to be, when its name says so


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
    if found is not None:
        return found
    url, variant = (weights, None) if is_url(weights) else _published_first(model)
    return _download(url, variant, sha256)


def find_cached(model: str, weights: str, dirs: list[Path]) -> Found | None:
    """The file already on disk for ``weights`` ("" / download: torchvision's published
    file or your own MODEL[-prefix].pth; an address: its file name), else None."""
    if is_url(weights):
        name = weights.rsplit("/", 1)[-1]
        return next((Found(d / name, None) for d in dirs if (d / name).is_file()), None)
    names = {v: url.rsplit("/", 1)[-1] for v, url in published(model).items()}
    for directory in dirs:
        for variant, name in names.items():
            if (directory / name).is_file():
                return Found(directory / name, variant)
        # your own file: MODEL.pth, or MODEL-<sha256 prefix>.pth (checked like hub's)
        own = sorted(directory.glob(f"{model}-*.pth")) if directory.is_dir() else []
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
    return WeightsSource(model, url=url, dest=dest, sha256=sha256, size=size, by_job=not here)


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


def verify(found: Found, sha256: str = "") -> str:
    """The file's sha256, checked against its name's hash prefix and ``sha256`` if given."""
    digest = sha256_file(found.path)
    if sha256 and digest != sha256.lower():
        raise DataError(
            f"{found.path} has sha256 {digest}, not the {sha256} the recipe gives",
            "use the file the recipe was written for, or correct model.weights_sha256.",
        )

    match = HASH_IN_NAME.search(found.path.name)
    if match and not digest.startswith(match[1]):
        raise DataError(
            f"{found.path} is damaged or not the published file: its sha256 {digest[:12]}... "
            f"does not start with the {match[1]} its name promises",
            "delete it and copy (or download) it again.",
        )
    return digest


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
    fetch(url, dest, sha256)
    return Found(dest, variant)
