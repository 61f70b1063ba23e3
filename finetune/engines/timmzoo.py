"""timm's models as the torch engine's second zoo: ``model.name: timm/<model>[.<tag>]``.

A name is told by its form here, without timm; timm itself (its registry and each weight
tag's pretrained config: mean, std, input size, crop, interpolation) is imported only when a
timm model is planned, listed or counted, since it imports torch. The pretrained config is the
run's preprocessing contract (finetune.train.preprocess); parameter counts come from
timm_models.csv (scripts/count_timm_models.py), else from the network built on the meta
device. Nothing here downloads."""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

from finetune.errors import ConfigError, did_you_mean

PREFIX = "timm/"
COUNTS_FILE = "timm_models.csv"  # Model,Parameters,TimmVersion
CROP_PCT = 0.875  # timm's DEFAULT_CROP_PCT, for a config without one


def is_timm(model: str) -> bool:
    """Whether ``model`` names a timm model (``timm/<model>[.<tag>]``)."""
    return model.startswith(PREFIX) and len(model) > len(PREFIX)


def timm_name(model: str) -> str:
    """'timm/convnext_atto.d2_in1k' -> 'convnext_atto.d2_in1k' (what timm is given)."""
    return model[len(PREFIX) :] if is_timm(model) else model


@functools.cache
def pretrained_cfg(model: str) -> dict[str, Any]:
    """timm's pretrained config of ``model`` (its tag's, else the architecture's default
    tag's) as a dict; ConfigError for a name timm does not know."""
    import timm  # deferred: timm imports torch (seconds); only a timm model needs it

    name = timm_name(model)
    arch, tag = timm.models.split_model_name_tag(name)
    if not timm.is_model(arch):
        raise ConfigError(
            f"unknown timm model {arch!r}.{did_you_mean(arch, timm.list_models())}",
            "list them with `finetune recipes models --filter WORD`.",
        )
    try:
        cfg = timm.models.get_pretrained_cfg(name)
    except RuntimeError:  # timm: "Invalid pretrained tag"
        tags = [t.split(".", 1)[1] for t in timm.list_pretrained(f"{arch}.*")]
        raise ConfigError(
            f"timm has no weights tagged {tag!r} for {arch}",
            f"use one of its tags: {', '.join(tags) or '(none: set model.pretrained=false)'}.",
        ) from None
    return cfg.to_dict() if cfg is not None else {"architecture": arch, "tag": tag}


def preprocessing(model: str, image_size: int) -> dict[str, Any]:
    """The contract's fields for ``model`` at ``image_size`` from its pretrained config:
    shorter side ``floor(image_size / crop_pct)`` (timm's eval transform), interpolation,
    mean and std in 0-255 units."""
    cfg = pretrained_cfg(model)
    return dict(
        resize_shorter=math.floor(image_size / (cfg.get("crop_pct") or CROP_PCT)),
        interpolation="bicubic" if cfg.get("interpolation") == "bicubic" else "bilinear",
        **mean_std(model),
    )


def mean_std(model: str) -> dict[str, Any]:
    """{"mean", "std"} of the weights, 0-255 (timm's IMAGENET defaults without a config)."""
    cfg = pretrained_cfg(model)
    mean, std = cfg.get("mean") or (0.485, 0.456, 0.406), cfg.get("std") or (0.229, 0.224, 0.225)
    return {"mean": _x255(mean), "std": _x255(std)}


def _x255(values) -> tuple[float, float, float]:
    first = [round(float(v) * 255, 4) for v in values] * 3  # (a grey model's one value)
    return first[0], first[1], first[2]


def size_kwargs(model: str, image_size: int) -> dict[str, Any]:
    """What timm's builder takes for the image size: ``img_size`` for a network built for one
    size (ViT, Swin...: position embeddings, windows), nothing for a pooled one."""
    return {"img_size": image_size} if pretrained_cfg(model).get("fixed_input_size") else {}


def meta_network(model: str, image_size: int, num_classes: int = 0) -> Any:
    """``model`` built by timm on the meta device (shapes only, no weights, nothing fetched),
    with ImageNet's head unless ``num_classes`` is given."""
    import timm  # deferred: it imports torch
    import torch

    kwargs = size_kwargs(model, image_size)
    if num_classes:
        kwargs["num_classes"] = num_classes
    with torch.device("meta"):
        return timm.create_model(timm_name(model), pretrained=False, **kwargs)


def check(model: str, image_size: int) -> None:
    """ConfigError for a name timm does not know, or an image size the network cannot take
    (tried on the meta device: a ViT's patches, a Swin's windows)."""
    import torch  # deferred: a timm model's check runs its network on the meta device

    cfg = pretrained_cfg(model)
    if not cfg.get("fixed_input_size"):
        return
    try:
        net = meta_network(model, image_size, num_classes=2)
        net(torch.empty(1, 3, image_size, image_size, device="meta"))
    except Exception as exc:  # timm's builders assert or raise many types on a bad size
        size = (cfg.get("input_size") or (3, 224, 224))[-1]
        raise ConfigError(
            f"{model} cannot take data.image_size={image_size}: {str(exc).splitlines()[0]}",
            f"use its own size ({size}) or one its patches and windows divide.",
        ) from None


@dataclass(frozen=True)
class Listed:
    """One row of `finetune recipes models`."""

    name: str  # as a recipe names it: timm/<model>[.<tag>]
    parameters: int | None  # with ImageNet's head; None where not counted
    input_size: int
    tag: str  # the weights' tag ("" without weights)
    pretrained: bool


def listing(pattern: str = "", pretrained: bool = False) -> list[Listed]:
    """timm's models whose name contains ``pattern`` (every weight tag with ``pretrained``,
    else each architecture with its default tag), from its registry: nothing downloaded."""
    import timm  # deferred: it imports torch

    wild = f"*{pattern}*" if pattern else ""
    names = timm.list_pretrained(wild) if pretrained else timm.list_models(wild)
    with_weights = set(timm.list_models(wild, pretrained=True, include_tags=False))
    counts = bundled_counts()
    rows = []
    for name in names:
        arch = timm.models.split_model_name_tag(name)[0]
        cfg = pretrained_cfg(PREFIX + name)
        has = arch in with_weights
        size = (cfg.get("input_size") or (3, 224, 224))[-1]
        params = counts.get(arch) if arch in counts else _count(arch)
        rows.append(Listed(PREFIX + name, params, size, cfg.get("tag") or "", has))
    return rows


@functools.cache
def bundled_counts() -> dict[str, int]:
    """Parameters per architecture (ImageNet's head) as timm_models.csv counted them."""
    text = resources.files("finetune.engines").joinpath(COUNTS_FILE).read_text("utf-8")
    return {r["Model"]: int(r["Parameters"]) for r in csv.DictReader(io.StringIO(text))}


def _count(arch: str) -> int | None:
    """Parameters of an architecture the bundled counts lack (a newer timm), on the meta
    device; None where timm cannot build it there."""
    try:
        return sum(p.numel() for p in meta_network(PREFIX + arch, 224).parameters())
    except Exception:  # a builder that needs real tensors or other arguments
        return None
