"""Pretrained weights before a launch: where they will come from (the dry-run's model line),
checked before any run exists, and fetched once into the cache for a run on this machine.

A run on this machine reads the engine's cache (torch hub's, $MXNET_HOME's), so the weights
are fetched here, before the run is created, with a progress bar; offline with nothing
cached, the launch (and its dry-run) stops with the fix. A run elsewhere (a cloud job) does
not see this machine's cache: its trainer fetches the published file itself at start, with
the same checks, and the dry-run says so and how large the file is.
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.backends.base import Backend, Hooks
from finetune.contracts.engine import WeightsSource, runtime
from finetune.download import Unreachable, check_address, probe
from finetune.download import fetch as download
from finetune.errors import DataError


@dataclass(frozen=True)
class WeightsPlan:
    """The dry-run's words for the weights, and what to fetch here before launching."""

    line: str
    fetch: WeightsSource | None = None  # what to fetch here before launching


def check(plan, backend: Backend) -> WeightsPlan:
    """Where ``plan``'s weights come from on ``backend``; DataError (with the fix) when a run
    there could not get them -- before anything exists."""
    r = plan.recipe
    if not r.model.pretrained:
        return WeightsPlan("random init")
    here = backend.capabilities.on_this_machine
    try:
        src = runtime(r.engine).weights_source(
            r.model.name, r.model.weights, r.model.weights_sha256, here
        )
    except ImportError as exc:  # torchvision not installed on the launching machine
        return WeightsPlan(f"pretrained (where from is unknown here: {exc})")
    if src.cached is not None:
        if not here:
            raise DataError(
                f"model.weights names {src.cached}, a file on this machine; a job on the "
                f"{backend.name} backend cannot read it",
                "give its https:// address (model.weights=https://...), or leave "
                "model.weights empty for the published weights (the job fetches them).",
            )
        return WeightsPlan(f"pretrained, from {src.cached}")
    dest = src.dest
    if dest is None:  # an engine names where weights go whenever none is cached
        raise ValueError(f"the weights of {src.model} have neither a file nor a destination")
    size = f", {src.size / 1e6:.1f} MB" if src.size else ""
    if src.url:  # the address is refused here, not by the job or after the run exists
        check_address(src.url, src.sha256)
    if src.by_job and src.url:
        return WeightsPlan(
            f"pretrained, fetched by the job itself from {_host(src.url)} at start{size} "
            "(the instance needs internet access)"
        )
    if src.by_job:  # the engine's own cache, on the machine that trains
        return WeightsPlan(
            f"pretrained, from the job's own {dest.name} cache or a pretrained channel; "
            "model.weights=download fetches them from the model zoo"
        )
    _reachable(src)
    return WeightsPlan(
        f"pretrained, downloaded once from {_host(src.url)} into {dest.parent}{size} "
        "before the run starts",
        fetch=src,
    )


def fetch(weights: WeightsPlan, hooks: Hooks | None = None) -> None:
    """Fetch what ``check`` found missing into the cache (verified, atomic), with progress."""
    src = weights.fetch
    if src is None or src.dest is None or src.dest.is_file():  # nothing to fetch here
        return
    hooks = hooks or Hooks()
    hooks.notify(f"Downloading {src.model} weights from {src.url} into {src.dest.parent}")
    if src.fetcher is not None:  # the engine's own cache layout (a model hub's), verified there
        src.fetcher()
        return
    download(src.url, src.dest, src.sha256, hooks.progress)


def _reachable(src) -> None:
    try:
        probe(src.url, sha256=src.sha256)
    except Unreachable as exc:
        raise DataError(
            f"pretrained weights for {src.model} are not in {src.dest.parent} and "
            f"{src.url} cannot be reached ({exc.reason})",
            f"connect to the internet and run again (they are fetched once, then cached), "
            f"copy {src.dest.name} into {src.dest.parent}, give a file with "
            "model.weights=PATH, or set model.pretrained=false.",
        ) from None


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url
