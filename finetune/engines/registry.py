"""The training engines by name: the one list of them (a third engine is one more line here,
its spec module and its runtime package). Light: an engine's runtime is imported only when a
job runs (finetune.contracts.engine.runtime)."""

from __future__ import annotations

from finetune.engines.descriptor import Engine
from finetune.engines.mxnet import MXNET
from finetune.engines.torch import TORCH
from finetune.errors import ConfigError, FinetuneError
from finetune.registry import Registry

ENGINES: Registry[Engine] = Registry("engine", ConfigError)
for _spec in (MXNET, TORCH):
    ENGINES.add(_spec.name, _spec)
NAMES: tuple[str, ...] = ENGINES.names
DEFAULT = MXNET.name  # a recipe or contract that names no engine: the studies' engine


def get(name: str, error: type[FinetuneError] = ConfigError) -> Engine:
    """The spec of engine ``name``; an unknown name is ``error`` (a ConfigError, or the
    caller's UsageError) with a suggestion."""
    return ENGINES.get(name, error)


def all_engines() -> list[Engine]:
    """Every engine's spec, in the registry's order."""
    return ENGINES.values()


def with_build_on(compute_capability: str | float) -> tuple[str, ...]:
    """The engines whose AWS build runs on a GPU of this compute capability."""
    return tuple(e.name for e in all_engines() if e.build.runs_on(compute_capability))


def with_features() -> str:
    """The engines that implement the recipe features, said plainly ("torch")."""
    return " or ".join(e.name for e in all_engines() if e.features)
