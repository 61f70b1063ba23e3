"""Finding pretrained weights on disk, checking them, and downloading only when asked.

Weights are looked up, in order, at ``hparams.weights`` (a path), in the ``pretrained``
input channel, and in ``$MXNET_HOME/models`` (default ~/.mxnet/models, where the GluonCV and
MXNet model zoos keep them). ``weights=download`` also allows fetching a missing file from the
model zoo over HTTPS, checked against the sha1 finetune ships (checksums.py). Without the file
and without that permission the run stops with an error that names the file and the folders,
instead of hanging on a network that a training container often does not have. The recipe's
model.weights_sha256, when given, must match whatever file is used.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from finetune.contracts.engine import WeightsSource
from finetune.data.manifest import sha256_file
from finetune.engines.mxnet import SYMBOL_MODELS
from finetune.errors import DataError
from finetune.train.engines.mxnet import zoo
from finetune.train.engines.mxnet.checksums import GLUON_REPO, SYMBOL_URL, ZOO_SHA1

DOWNLOAD = "download"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Weights:
    """A Gluon parameter file, or an MXNet symbol checkpoint (symbol + params)."""

    params: Path
    symbol: Path | None = None


def mxnet_home() -> Path:
    return Path(os.environ.get("MXNET_HOME") or "~/.mxnet").expanduser()


def search_dirs(pretrained_dir: Path | None) -> list[Path]:
    dirs = [pretrained_dir] if pretrained_dir else []
    return [*dirs, mxnet_home() / "models"]


def locate(model: str, weights: str, dirs: list[Path], sha256: str = "") -> Weights:
    """The weights of ``model`` (see the module docstring); DataError when there are none.
    ``sha256`` (the recipe's model.weights_sha256), when given, must match the params file."""
    if weights and weights != DOWNLOAD:
        return _pinned(_explicit(model, Path(weights).expanduser(), dirs), sha256)
    for directory in dirs:
        found = _in_dir(model, directory)
        if found:
            return _pinned(_verified(model, found), sha256)
    if weights == DOWNLOAD:
        return _pinned(_download(model, mxnet_home() / "models"), sha256)
    # the 11k network exists only as its symbol file: starting from scratch needs it too
    scratch = "." if model in SYMBOL_MODELS else ", or set pretrained=false."
    raise DataError(
        f"pretrained weights for {model} not found: looked for {' or '.join(_names(model))} "
        f"in {', '.join(str(d) for d in dirs)}",
        "put the file into one of those folders (an input channel named pretrained, or "
        "$MXNET_HOME/models), set the hyperparameter weights=PATH, or set weights=download to "
        f"fetch it from the model zoo (needs internet){scratch}",
    )


def source(model: str, weights: str, sha256: str = "", here: bool = True):
    """Where the weights would come from (finetune.contracts.engine.WeightsSource): a file found
    now, else the model zoo's download by the run itself when ``weights=download``; neither:
    the DataError ``locate`` gives (before anything is launched)."""

    home = mxnet_home() / "models"
    if not here and weights != DOWNLOAD:  # the job's own $MXNET_HOME or pretrained channel
        return WeightsSource(model, dest=home, by_job=True)
    if weights != DOWNLOAD:
        return WeightsSource(model, cached=locate(model, weights, [home], sha256).params)
    found = _in_dir(model, home)
    if found:
        return WeightsSource(model, cached=found.params)
    url = SYMBOL_URL.format("0000.params") if model in SYMBOL_MODELS else GLUON_REPO
    return WeightsSource(model, url=url, dest=home, sha256=sha256, by_job=True)


def _names(model: str) -> list[str]:
    if model in SYMBOL_MODELS:
        prefix = SYMBOL_MODELS[model]
        return [f"{p}-symbol.json + {p}-0000.params" for p in (model, prefix)]
    sha1 = zoo_sha1(model)
    canonical = [f"{model}-{sha1[:8]}.params"] if sha1 else []
    return [*canonical, f"{model}.params"]


def _in_dir(model: str, directory: Path) -> Weights | None:
    if model in SYMBOL_MODELS:
        for prefix in (model, SYMBOL_MODELS[model]):
            found = _symbol_pair(directory / prefix)
            if found:
                return found
        return None
    for name in _names(model):
        if (directory / name).is_file():
            return Weights(directory / name)
    return None


def _symbol_pair(prefix: Path, epoch: int = 0) -> Weights | None:
    symbol = Path(f"{prefix}-symbol.json")
    params = Path(f"{prefix}-{epoch:04d}.params")
    return Weights(params, symbol) if symbol.is_file() and params.is_file() else None


def _explicit(model: str, path: Path, dirs: list[Path]) -> Weights:
    """``weights=`` names a file (or a checkpoint prefix), absolute or inside a search dir."""
    candidates = [path] if path.is_absolute() else [path, *(d / path for d in dirs)]
    for p in candidates:
        if model in SYMBOL_MODELS:
            m = re.fullmatch(r"(.*)-(\d{4})\.params", str(p))
            found = _symbol_pair(Path(m[1]), int(m[2])) if m else _symbol_pair(p)
            if found:
                return _verified(model, found)
        elif p.is_file():
            return _verified(model, Weights(p))
    raise DataError(
        f"weights={path} not found (looked in {', '.join(str(c) for c in candidates)})",
        "give an existing file (for imagenet11k-resnet-152: the checkpoint prefix or its "
        "-0000.params file next to -symbol.json), or leave weights empty to search the cache.",
    )


def zoo_sha1(model: str) -> str | None:
    """The sha1 finetune ships for a model-zoo parameter file (not the installed zoo's)."""
    return ZOO_SHA1.get(model)


def _pinned(w: Weights, sha256: str) -> Weights:
    if sha256:
        _check(w.params, "sha256", sha256)
    return w


def _verified(model: str, w: Weights) -> Weights:
    """Check a file against the zoo's sha1 when its name claims to be the zoo's file
    (NAME-<first 8 of sha1>.params), and against a ``FILE.sha256`` beside it if present."""
    sha1 = zoo_sha1(model) if w.symbol is None else None
    if sha1 and w.params.name == f"{model}-{sha1[:8]}.params":
        _check(w.params, "sha1", sha1)
    for file in (w.params, w.symbol):  # the symbol (the network's graph) too, when recorded
        sidecar = Path(f"{file}.sha256")
        if file is not None and sidecar.is_file():
            _check(file, "sha256", sidecar.read_text().split()[0])
    log.info("pretrained weights: %s", w.params)
    return w


def _check(path: Path, algorithm: str, expected: str) -> None:
    with open(path, "rb") as f:
        h = hashlib.file_digest(f, algorithm)
    if h.hexdigest() != expected.lower():
        raise DataError(
            f"{path} is corrupt or not the published file: {algorithm} {h.hexdigest()}, "
            f"expected {expected}",
            "delete it and copy the file again (or set weights=download).",
        )


def _download(model: str, root: Path) -> Weights:
    """Fetch from the model zoo over HTTPS, then check the file against the sha1 we ship.
    Network errors become a DataError that says what to do."""
    repo = os.environ.get("MXNET_GLUON_REPO", GLUON_REPO)
    if not repo.startswith("https://"):
        raise DataError(
            f"MXNET_GLUON_REPO={repo} is not an https:// address",
            f"unset it (the model zoo's default is {GLUON_REPO}) or use an https mirror.",
        )
    if model not in SYMBOL_MODELS and model not in ZOO_SHA1:
        raise DataError(
            f"finetune ships no checksum for {model}'s pretrained weights: not downloading",
            "copy the file into $MXNET_HOME/models or a pretrained channel, or set "
            "pretrained=false.",
        )
    root.mkdir(parents=True, exist_ok=True)
    try:
        if model in SYMBOL_MODELS:
            return _download_symbol(model, root)
        try:
            store = zoo.module("gluoncv.model_zoo.model_store")
        except ImportError:
            store = importlib.import_module("mxnet.gluon.model_zoo.model_store")
        params = Path(store.get_model_file(model, root=str(root)))
        _check(params, "sha1", ZOO_SHA1[model])  # ours, whatever the zoo's table says
        return Weights(params)
    except (OSError, ValueError) as exc:  # requests' errors are OSErrors; sha1 -> ValueError
        raise DataError(
            f"could not download the pretrained weights of {model} into {root}: {exc}",
            f"copy the file into {root} or a pretrained channel, or set pretrained=false.",
        ) from exc


def _download_symbol(model: str, root: Path) -> Weights:
    """The ImageNet-11k checkpoint has no published checksum: record the sha256 of both files
    downloaded beside them (checked on every later use), and log it."""
    from mxnet.gluon.utils import download

    prefix = root / SYMBOL_MODELS[model]
    for suffix in ("symbol.json", "0000.params"):
        path = f"{prefix}-{suffix}"
        download(SYMBOL_URL.format(suffix), path=path)
        digest = sha256_file(Path(path))
        Path(f"{path}.sha256").write_text(digest + "\n")
        log.warning("downloaded %s without a published checksum; sha256 %s", path, digest)
    return Weights(Path(f"{prefix}-0000.params"), Path(f"{prefix}-symbol.json"))
