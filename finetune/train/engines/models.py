"""Which models each engine builds: plain data, checked when a run is planned (before any
money is spent) and again by the trainer. No engine library is imported here."""

from __future__ import annotations

from finetune.contracts.hparams import ENGINES
from finetune.errors import ConfigError, did_you_mean
from finetune.train.engines import backbones

_MXNET_DEPTHS = {
    "_v1": (18, 34, 50, 101, 152),
    "_v2": (18, 34, 50, 101, 152),
    "_v1b": (18, 34, 50, 101, 152),
    "_v1c": (50, 101, 152),
    "_v1d": (50, 101, 152),
}
MXNET_SYMBOL_MODELS = {"imagenet11k-resnet-152": "resnet-152"}  # name -> checkpoint prefix

MODELS: dict[str, tuple[str, ...]] = {
    # GluonCV model-zoo names, and the ImageNet-11k symbol checkpoint of the MXNet studies
    "mxnet": tuple(
        sorted(
            [f"resnet{d}{v}" for v, depths in _MXNET_DEPTHS.items() for d in depths]
            + list(MXNET_SYMBOL_MODELS)
        )
    ),
    # torchvision's ImageNet classification networks (finetune.train.engines.backbones)
    "torch": tuple(backbones.TABLE),
}
_WHAT = {"mxnet": "GluonCV ResNets and the ImageNet-11k ResNet-152", "torch": "torchvision"}


def check_model(engine: str, model: str) -> None:
    """ConfigError for a model ``engine`` cannot build, with a did-you-mean over every
    engine's names (a torch name under the MXNet engine says which engine has it)."""
    if engine not in ENGINES:
        raise ConfigError(
            f"unknown engine {engine!r}.{did_you_mean(engine, list(ENGINES))}",
            f"use one of: {', '.join(ENGINES)}.",
        )
    if model in MODELS[engine]:
        return
    listed = backbones.known() if engine == "torch" else ", ".join(MODELS[engine])
    for other, names in MODELS.items():
        if model in names:
            raise ConfigError(
                f"model {model!r} is a {other} model, but this recipe runs the {engine} engine "
                f"(it builds {_WHAT[engine]} only)",
                f"set engine={other}, or use a {engine} model: {listed}.",
            )
    everything = [name for names in MODELS.values() for name in names]
    raise ConfigError(
        f"unknown model {model!r} for the {engine} engine.{did_you_mean(model, everything)}",
        f"use one of: {listed}.",
    )


# training presets each engine implements (finetune.train.preprocess); colour and affine
# jitter exist in MXNet's ImageRecordIter only
AUGMENTATIONS: dict[str, tuple[str, ...]] = {
    "mxnet": (
        "none", "crop", "crop_color", "crop_color_transform", "resized_crop", "resized_crop_color"
    ),
    "torch": ("none", "crop", "resized_crop"),
}  # fmt: skip


def check_augmentation(engine: str, augmentation: str) -> None:
    """ConfigError for a training preset ``engine`` does not implement."""
    if augmentation not in AUGMENTATIONS.get(engine, ()):
        raise ConfigError(
            f"augmentation {augmentation!r} is not implemented by the {engine} engine",
            f"use one of: {', '.join(AUGMENTATIONS.get(engine, ()))}.",
        )
