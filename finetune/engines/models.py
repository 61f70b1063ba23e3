"""Which models each engine builds: plain data from the engines' descriptors
(finetune.engines.registry), checked when a run is planned (before any money is spent)
and again by the trainer. No engine library is imported here."""

from __future__ import annotations

from finetune.engines import registry
from finetune.errors import ConfigError, did_you_mean

MODELS: dict[str, tuple[str, ...]] = {e.name: e.models for e in registry.all_engines()}


def check_model(engine: str, model: str) -> None:
    """ConfigError for a model ``engine`` cannot build, with a did-you-mean over every
    engine's names (a torch name under the MXNet engine says which engine has it)."""
    described = registry.get(engine)
    if described.builds_model(model):
        return
    listed = described.listed()
    for spec in registry.all_engines():
        other = spec.name
        if other != engine and spec.builds_model(model):
            raise ConfigError(
                f"model {model!r} is a {other} model, but this recipe runs the {engine} engine "
                f"(it builds {described.builds} only)",
                f"set engine={other}, or use a {engine} model: {listed}.",
            )
    everything = [name for names in MODELS.values() for name in names]
    raise ConfigError(
        f"unknown model {model!r} for the {engine} engine.{did_you_mean(model, everything)}",
        f"use one of: {listed}.",
    )


# training presets each engine implements (finetune.train.preprocess)
AUGMENTATIONS: dict[str, tuple[str, ...]] = {
    e.name: e.augmentations for e in registry.all_engines()
}


def check_augmentation(engine: str, augmentation: str) -> None:
    """ConfigError for a training preset ``engine`` does not implement."""
    presets = AUGMENTATIONS.get(engine, ())
    if augmentation not in presets:
        raise ConfigError(
            f"augmentation {augmentation!r} is not implemented by the {engine} engine",
            f"use one of: {', '.join(presets)}.",
        )
