"""What an engine's runtime gives the rest of finetune: train a job, say where a model's
pretrained weights come from, score and export a finished model, and clean up after a failed
job. Each engine package exports one ``RUNTIME``; its spec (finetune.engines) names it, and
:func:`runtime` is the only place that imports it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from finetune.contracts.container import TrainJob
from finetune.engines import registry


class StopFlag(Protocol):
    """A stop request as an engine sees it (finetune.train.signals.StopRequest): true once a
    signal asked the run to stop, after the batch under way and a checkpoint."""

    @property
    def signal_name(self) -> str | None:
        """The signal that asked (None: none did)."""

    def __bool__(self) -> bool: ...

    def started(self) -> None:
        """Start-up is over: from here a stop is saved, not raised."""

    def request(self, signal_name: str) -> None:
        """Stop as if ``signal_name`` had arrived here (another process of the run got it)."""


@dataclass(frozen=True)
class WeightsSource:
    """Where a run's pretrained weights come from, seen from the launching machine: a file
    already here (``cached``), or an address to fetch (``url``) into ``dest`` (``size``
    bytes, 0 unknown; ``sha256``: the full digest it must have, "" when only its name's
    prefix is checked). ``by_job``: the engine's trainer fetches it itself, never the
    launching machine (the model zoo's own download). ``fetcher``: the engine's own way to
    fetch it into its cache (a model hub's layout), instead of downloading ``url`` to ``dest``."""

    model: str
    cached: Path | None = None
    url: str = ""
    dest: Path | None = None
    sha256: str = ""
    size: int = 0
    by_job: bool = False
    fetcher: Callable[[], object] | None = None


class EngineRuntime(Protocol):
    """One engine's heavy half; importing it imports no framework (each call does)."""

    def fit(self, job: TrainJob, stop: StopFlag | None = None) -> object:
        """Train ``job``, resuming from its newest checkpoint (or start the processes that
        do, returning finetune.train.engine_api.Launched)."""

    def weights_source(self, model: str, weights: str, sha256: str, here: bool) -> WeightsSource:
        """Where ``model``'s pretrained weights would come from (nothing fetched): for a run
        on this machine (``here``: its caches count) or on another."""

    def predict_scores(self, model_dir: Path, rec: Path, idx: Path) -> Any:
        """(N, classes) scores of a model folder's network for every record of ``rec``."""

    def export(self, model_dir: Path, out: Path) -> list[str]:
        """The engine's portable model files into the folder ``out``; their names."""

    def count_step(self, model: str, image_size: int, precision: str) -> tuple | None:
        """One training step of ``model`` counted on the meta device (no weights, nothing
        fetched) as a row of finetune.estimate.perf.traffic's table, in ``precision``'s class;
        None where the engine's bundled counts are all it has."""

    def after_failure(self, code: int) -> None:
        """After a failed job (its reason written): end the process at once with ``code``
        where the engine left processes behind that would hang its exit."""


def runtime(engine: str) -> EngineRuntime:
    """The runtime of engine ``engine`` (ConfigError for an unknown name)."""
    module, _, attribute = registry.get(engine).runtime.partition(":")
    return cast(EngineRuntime, getattr(importlib.import_module(module), attribute))
