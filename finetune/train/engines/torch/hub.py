"""timm's pretrained weights: a local file (``model.weights=PATH``), the ``pretrained`` input
channel, or the Hugging Face hub's cache ($HF_HOME/hub), fetched once by huggingface_hub when
missing (``HF_ENDPOINT`` moves the hub, ``HF_HUB_OFFLINE=1`` keeps it off the network).

Every file is checked before it is loaded: a hub file against the blob name the hub's cache
stores it under (its sha256 for the large, LFS-kept files weights are; git's blob id for a
small one), any file against ``model.weights_sha256`` when the recipe gives it. Loaded without
running pickled code (safetensors, or torch.load with weights_only)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Any

from finetune.contracts.engine import WeightsSource
from finetune.data.manifest import sha256_file
from finetune.download import is_loopback
from finetune.engines import timmzoo
from finetune.errors import DataError

FILES = ("model.safetensors", "pytorch_model.bin")  # timm's order: safetensors first
HUB = "https://huggingface.co"
SHA256, GIT_SHA1 = re.compile(r"[0-9a-f]{64}"), re.compile(r"[0-9a-f]{40}")

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """The hub's cache: $HF_HUB_CACHE, else $HF_HOME/hub (~/.cache/huggingface/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface"
    return Path(home) / "hub"


def endpoint() -> str:
    """The hub's address ($HF_ENDPOINT, else huggingface.co), read now; https only (the blob
    name a file is checked against comes from the hub's reply), except on this machine."""
    url = os.environ.get("HF_ENDPOINT") or HUB
    if not url.startswith("https://") and not (url.startswith("http://") and is_loopback(url)):
        raise DataError(
            f"HF_ENDPOINT={url} is not an https:// address: the weights' digest comes from "
            "the hub's reply, so it must come over TLS",
            f"unset HF_ENDPOINT (the hub: {HUB}) or give your mirror's https:// address.",
        )
    return url.rstrip("/")


def repo_of(model: str) -> tuple[str, str | None, tuple[str, ...]]:
    """(hub repository, revision or None, file names to try) of ``model``'s weights tag."""
    cfg = timmzoo.pretrained_cfg(model)
    hub_id = cfg.get("hf_hub_id")
    if not hub_id:
        raise DataError(
            f"timm publishes no Hugging Face hub weights for {model}",
            "give a weights file (model.weights=PATH), or set model.pretrained=false.",
        )
    repo, _, revision = str(hub_id).partition("@")
    named = cfg.get("hf_hub_filename")
    return repo, revision or None, (named,) if named else FILES


def cached(model: str) -> Path | None:
    """The weights already in the hub's cache, else None (nothing is asked of the network)."""
    from huggingface_hub import try_to_load_from_cache  # deferred: only timm models need it

    repo, revision, names = repo_of(model)
    for name in names:
        found = try_to_load_from_cache(repo, name, cache_dir=cache_dir(), revision=revision)
        if isinstance(found, str):
            return Path(found)
    return None


def download(model: str) -> Path:
    """The weights fetched into the hub's cache by huggingface_hub, checked; DataError
    saying what to do when they cannot be fetched."""
    from huggingface_hub import hf_hub_download  # deferred: only timm models need it
    from huggingface_hub.errors import EntryNotFoundError

    repo, revision, names = repo_of(model)
    address = endpoint()  # read now, not at huggingface_hub's import
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    failure: Exception | None = None
    for name in names:
        try:
            path = hf_hub_download(repo, name, revision=revision, cache_dir=cache_dir(),
                                   endpoint=address, local_files_only=offline)  # fmt: skip
        except EntryNotFoundError as exc:  # the next name (pytorch_model.bin)
            failure = exc
            continue
        except Exception as exc:  # the hub's errors: offline, HTTP, timeouts, disk
            failure = exc
            break
        verify(Path(path))
        return Path(path)
    raise DataError(
        f"the weights of {model} are not in {cache_dir()} and could not be fetched from "
        f"the hub ({repo}): {type(failure).__name__}: {str(failure).splitlines()[0]}",
        "connect to the internet (they are fetched once, then cached), give a file with "
        "model.weights=PATH, or set model.pretrained=false.",
    )


def locate(model: str, weights: str, dirs: list[Path], sha256: str = "") -> Path:
    """The weight file of a timm run: ``weights`` (a path), a file in ``dirs`` (the
    pretrained channel) named as the hub names it, the hub's cache, else downloaded."""
    if weights and weights != "download":
        path = Path(weights).expanduser()
        if path.is_file():
            return path
        raise DataError(
            f"weights file {weights} not found (a timm model takes a local file, or its "
            "Hugging Face hub weights when model.weights is empty)",
            "give an existing file, or leave model.weights empty for the hub's weights.",
        )
    for directory in dirs:
        for name in repo_of(model)[2]:
            if (directory / name).is_file():
                return directory / name
    return cached(model) or download(model)


def verify(path: Path, sha256: str = "") -> str:
    """``path``'s sha256, checked against ``sha256`` when given and, for a file of the hub's
    cache, against the blob it links to (the hub names a weights blob by its sha256)."""
    digest = sha256_file(path)
    if sha256 and digest != sha256.lower():
        raise DataError(
            f"{path} has sha256 {digest}, not the {sha256} the recipe gives",
            "use the file the recipe was written for, or correct model.weights_sha256.",
        )
    blob = path.resolve().name
    if SHA256.fullmatch(blob):
        expected, got = blob, digest
    elif GIT_SHA1.fullmatch(blob):  # a small, non-LFS file: git's blob id
        data = path.read_bytes()
        # bandit B324 (sha1): the hub names small files by git's blob id, which is SHA-1
        expected, got = blob, hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # nosec B324
    else:
        return digest
    if got != expected:
        raise DataError(
            f"{path} is damaged or not the hub's file: it hashes to {got[:12]}..., the hub "
            f"stored it as {expected[:12]}...",
            f"delete {path.resolve()} (and its link) and run again: it is fetched anew.",
        )
    return digest


def load_state(path: Path) -> dict:
    """The file's state dict (a training checkpoint's ``state_dict``/``model`` inside), loaded
    without running pickled code."""
    import torch

    state: Any
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path), device="cpu")
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling and safetensors errors have many types
        raise DataError(
            f"{path} is not a weights file ({type(exc).__name__}: {str(exc)[:120]})",
            "use the hub's model.safetensors, or a state_dict saved with torch.save.",
        ) from None
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not state:
        raise DataError(f"{path} holds no state_dict", "use the hub's model.safetensors.")
    return {k.removeprefix("module."): v for k, v in state.items()}


def source(model: str, weights: str, sha256: str = "", here: bool = True) -> WeightsSource:
    """Where a timm run's weights would come from, nothing fetched (WeightsSource)."""
    if weights and weights != "download":
        path = Path(weights).expanduser()
        if not path.is_file():
            locate(model, weights, [])  # the DataError that says so
        return WeightsSource(model, cached=path)
    found = cached(model) if here else None
    if found is not None:
        return WeightsSource(model, cached=found)
    from huggingface_hub import hf_hub_url  # deferred: only timm models need it

    repo, revision, names = repo_of(model)
    url = hf_hub_url(repo, names[0], revision=revision, endpoint=endpoint())
    dest = cache_dir() / ("models--" + repo.replace("/", "--")) / names[0]
    return WeightsSource(model, url=url, dest=dest, sha256=sha256, by_job=not here,
                         fetcher=lambda: download(model))  # fmt: skip
