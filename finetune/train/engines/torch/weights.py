"""torchvision's ImageNet weights: found on disk, checked, loaded safely; downloaded only when
asked.

Where they are looked for, in order: ``hparams.weights`` (a file path), the ``pretrained``
input channel, and torch hub's cache (``$TORCH_HOME/hub/checkpoints``, default
~/.cache/torch/hub/checkpoints), by the file name torchvision publishes (``resnet50-
11ad3fa6.pth`` for ``IMAGENET1K_V2``; the names and URLs come from the installed torchvision,
never from a table here), then as ``MODEL.pth`` or ``MODEL-<sha256 prefix>.pth``. A file
is checked the way torch.hub checks it: the hex digits after the last ``-`` of its name must
start its sha256; ``weights_sha256`` (when the recipe gives one) must equal it in full.
Files are loaded with ``weights_only=True`` (no pickled code runs). ``weights=download``
alone allows fetching, through torch.hub, into its cache.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from finetune.errors import DataError

DOWNLOAD = "download"
VARIANTS = ("IMAGENET1K_V2", "IMAGENET1K_V1")  # preference order when no file is named
_HASH_SUFFIX = re.compile(r"-([a-f0-9]{6,64})\.")

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


def locate(model: str, weights: str, dirs: list[Path]) -> Found:
    """The weight file for ``model``; DataError naming the files and folders when none."""
    names = {v: url.rsplit("/", 1)[-1] for v, url in published(model).items()}
    if weights and weights != DOWNLOAD:
        path = Path(weights).expanduser()
        if path.is_file():
            return Found(path, next((v for v, n in names.items() if n == path.name), None))
        for directory in dirs:  # a bare file name: look for it in the search folders
            if (directory / weights).is_file():
                return Found(directory / weights, None)
        raise DataError(
            f"weights file {weights} not found (also looked in {', '.join(map(str, dirs))})",
            "give an existing file, put it in one of those folders, or set pretrained=false.",
        )
    for directory in dirs:
        for variant, name in names.items():
            if (directory / name).is_file():
                return Found(directory / name, variant)
        # your own file: MODEL.pth, or MODEL-<sha256 prefix>.pth (checked like hub's)
        own = sorted(directory.glob(f"{model}-*.pth")) if directory.is_dir() else []
        for path in [directory / f"{model}.pth", *own]:
            if path.is_file():
                return Found(path, None)
    if weights == DOWNLOAD:
        return _download(model)
    looked = [*names.values(), f"{model}.pth", f"{model}-<sha256 prefix>.pth"]
    raise DataError(
        f"pretrained weights for {model} not found: looked for {' or '.join(looked)} "
        f"in {', '.join(str(d) for d in dirs)}",
        "copy torchvision's weight file there (or into an input channel named pretrained), "
        "set weights=download to fetch it once (needs the internet), or set pretrained=false.",
    )


def verify(found: Found, sha256: str = "") -> str:
    """The file's sha256, checked against its name's hash prefix and ``sha256`` if given."""
    digest = _sha256(found.path)
    if sha256 and digest != sha256.lower():
        raise DataError(
            f"{found.path} has sha256 {digest}, not the {sha256} the recipe gives",
            "use the file the recipe was written for, or correct model.weights_sha256.",
        )
    match = _HASH_SUFFIX.search(found.path.name)
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


def _download(model: str) -> Found:
    import torch

    variant, url = next(iter(published(model).items()))
    log.info("downloading %s weights %s (weights=download)", model, url)
    try:
        torch.hub.load_state_dict_from_url(url, progress=False, check_hash=True)
    except Exception as exc:  # no network, a proxy, a hash mismatch: say which
        raise DataError(
            f"could not download {url}: {exc}",
            f"copy the file into {hub_dir()} yourself, or set pretrained=false.",
        ) from None
    return Found(hub_dir() / url.rsplit("/", 1)[-1], variant)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
