"""Which training engine runs on which GPU: each engine's framework build as AWS runs it
(training image or Deep Learning AMI) and the GPU architecture (CUDA compute capability) that
build has kernels for. The facts, and why the bounds are what they are, live with each
engine's descriptor (finetune.engines.registry); this module answers the catalog's
questions about them."""

from __future__ import annotations

from finetune.engines import registry
from finetune.engines.descriptor import EngineBuild
from finetune.errors import UsageError

__all__ = ["BUILDS", "EngineBuild", "build", "engines_for", "needs"]

BUILDS: dict[str, EngineBuild] = {e.name: e.build for e in registry.all_engines()}


def build(engine: str) -> EngineBuild:
    """The AWS build of ``engine``; an unknown name is a UsageError with a suggestion."""
    return registry.get(engine, UsageError).build


def engines_for(compute_capability: str | float) -> tuple[str, ...]:
    """The engines whose AWS build runs on a GPU of this compute capability."""
    return registry.with_build_on(compute_capability)


def needs(engine: str) -> str:
    """What a cloud run of ``engine`` needs, said plainly (shown with the plan)."""
    b = build(engine)
    gpus = f"a GPU of compute capability {b.min_capability:g}"
    gpus += f" to below {b.below:g} (older than Hopper)" if b.below else " or newer"
    return f"{b.framework}: {gpus}" + (f"; {b.prerequisite}" if b.prerequisite else "")
