"""The network: a torchvision ImageNet classifier (finetune.engines.backbones) or a timm model
(``timm/<model>``: finetune.train.engines.torch.zoo), its weights loaded unchanged, then a new
head for the dataset's classes; a frozen backbone keeps its normalisation layers as loaded
(docs/trainer.md: networks and their new head)."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import torch
from torch import nn

from finetune.contracts.hparams import TrainHyperparameters
from finetune.engines import backbones, timmzoo
from finetune.engines.models import check_model
from finetune.errors import ConfigError, DataError
from finetune.train.engines.torch import hub, zoo
from finetune.train.engines.torch import weights as wt

log = logging.getLogger(__name__)
NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)


def construct(name: str, num_classes: int, image_size: int) -> nn.Module:
    """torchvision's ``name`` with random weights and ``num_classes`` outputs, built for
    ``image_size`` where the family's builder needs it (ViT, MaxViT); timm's for a timm name."""
    from torchvision import models

    if timmzoo.is_timm(name):
        return zoo.construct(name, num_classes, image_size)

    row = backbones.get(name)
    kwargs: dict = {}
    size_arg = backbones.FAMILIES[row.family].size_arg
    if size_arg == "image_size":
        kwargs["image_size"] = image_size
    elif size_arg == "input_size":
        kwargs["input_size"] = (image_size, image_size)
    net = models.get_model(name, weights=None, num_classes=num_classes, **kwargs)
    _residual_blocks_start_as_identity(net)
    return net


def _residual_blocks_start_as_identity(net: nn.Module) -> None:
    """EfficientNet's residual blocks (MBConv, FusedMBConv) with their last BatchNorm's scale
    at zero, so each starts as the identity (as ResNets' zero_init_residual, Goyal et al.
    2017). torchvision initialises that scale to one: from random weights EfficientNetV2-S's
    ~40 residual blocks then add up to a signal that small-batch SGD did not train out of
    (measured: 8 classes at 32 px, 40 SGD steps of 32, validation top-1 0.150 as built,
    0.425 with this). Loaded weights replace it."""
    from torchvision.models.efficientnet import FusedMBConv, MBConv

    for block in net.modules():
        if isinstance(block, MBConv | FusedMBConv) and block.use_res_connect:
            norms = [m for m in block.block.modules() if isinstance(m, nn.BatchNorm2d)]
            if norms:
                nn.init.zeros_(norms[-1].weight)


def heads(name: str) -> tuple[str, ...]:
    """The dotted paths (and state_dict prefixes) of ``name``'s classifier head."""
    return zoo.heads(name) if timmzoo.is_timm(name) else (backbones.get(name).head,)


def in_head(param: str, paths: tuple[str, ...]) -> bool:
    return any(param == p or param.startswith(p + ".") for p in paths)


def build(hp: TrainHyperparameters, found: wt.Found | None) -> tuple[nn.Module, dict]:
    """The network for ``hp`` and what was loaded (file, sha256, variant) for the record."""
    check_model("torch", hp.model)
    head = heads(hp.model)
    loaded: dict = {}
    if found is None:
        net = construct(hp.model, hp.num_classes, hp.image_size)
    elif timmzoo.is_timm(hp.model):
        digest = hub.verify(found.path, hp.weights_sha256)
        own = bool(hp.weights) and hp.weights != "download"  # the user's file, not the hub's
        net = zoo.pretrained(hp.model, hp.num_classes, hp.image_size, found.path, own)
        loaded = {"file": str(found.path), "sha256": digest, "variant": found.variant,
                  "pretrained_cfg": timmzoo.pretrained_cfg(hp.model)}  # fmt: skip
    else:
        digest = wt.verify(found, hp.weights_sha256)
        net = _pretrained(hp, found, head[0])
        replace_head(net, head[0], hp.num_classes)
        loaded = {"file": str(found.path), "sha256": digest, "variant": found.variant}
        planned = backbones.get(hp.model).variant
        if found.variant and found.variant != planned:
            log.warning("%s holds %s weights; the preprocessing contract is %s's (planned)",
                        found.path.name, found.variant, planned)  # fmt: skip
    if found is not None:
        log.info("loaded %s (%s), %s replaced for %d classes", found.path, loaded["sha256"][:12],
                 ", ".join(head), hp.num_classes)  # fmt: skip
    if hp.freeze_backbone:
        for name, param in net.named_parameters():
            param.requires_grad = in_head(name, head)
    return net, loaded


def find(hp: TrainHyperparameters, dirs: list[Path]) -> wt.Found:
    """The pretrained weights of ``hp`` (torchvision's, or a timm model's through the hub)."""
    if timmzoo.is_timm(hp.model):
        path = hub.locate(hp.model, hp.weights, dirs, hp.weights_sha256)
        return wt.Found(path, timmzoo.pretrained_cfg(hp.model).get("tag"))
    return wt.locate(hp.model, hp.weights, dirs, hp.weights_sha256)


def _pretrained(hp: TrainHyperparameters, found: wt.Found, head: str) -> nn.Module:
    """The network with the file's weights, its head still the file's."""
    state = wt.load_state(found)
    weight = state.get(f"{head}.weight")
    if weight is None or weight.ndim != 2:
        raise DataError(
            f"{found.path} has no {head}.weight: it is not a torchvision {hp.model} state_dict",
            f"use torchvision's {hp.model} weights (e.g. {hp.model}-<hash>.pth).",
        )
    net = construct(hp.model, weight.shape[0], hp.image_size)
    if backbones.get(hp.model).family == "vit":
        from torchvision.models.vision_transformer import interpolate_embeddings

        # the weights' grid of patches resampled to this image size's (a no-op at 224); not
        # a ViT state_dict: load_state_dict below says what does not fit
        with contextlib.suppress(KeyError, ValueError, RuntimeError):
            state = interpolate_embeddings(hp.image_size, net.patch_size, state)
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise DataError(
            f"weights {found.path} do not fit {hp.model}: {str(exc).splitlines()[0]}",
            f"use the weights of {hp.model} itself (the same variant and size).",
        ) from None
    return net


def replace_head(net: nn.Module, path: str, num_classes: int) -> None:
    """A fresh Linear layer at ``path`` for ``num_classes`` (same inputs, same bias)."""
    parent_path, _, leaf = path.rpartition(".")
    parent = net.get_submodule(parent_path) if parent_path else net
    old = net.get_submodule(path)
    if not isinstance(old, nn.Linear):  # the backbone table names each family's Linear head
        raise ConfigError(
            f"the head at {path} is a {type(old).__name__}, not a Linear layer",
            "report this: finetune's backbone table names the wrong layer.",
        )
    new = nn.Linear(old.in_features, num_classes, bias=old.bias is not None)
    if isinstance(parent, nn.Sequential) and leaf.isdigit():
        parent[int(leaf)] = new
    else:
        setattr(parent, leaf, new)


def param_groups(net: nn.Module, hp: TrainHyperparameters) -> list[dict]:
    """Backbone and head as two optimizer groups; ``lr_mult`` scales each group's rate."""
    paths = heads(hp.model)
    named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    head = [p for n, p in named if in_head(n, paths)]
    body = [p for n, p in named if not in_head(n, paths)]
    groups = [{"params": head, "lr_mult": hp.head_lr_mult}]
    if body:
        groups.insert(0, {"params": body, "lr_mult": 1.0})
    return groups


def train_mode(net: nn.Module, frozen_backbone: bool, batchnorm: str = "batch",
               head: tuple[str, ...] = ("fc",)) -> None:  # fmt: skip
    """Training mode, except the normalisation layers of a frozen backbone (BatchNorm,
    LayerNorm, GroupNorm: eval mode) and BatchNorm with ``batchnorm=frozen`` (stored
    statistics, never updated). The head (``head``'s modules) trains either way."""
    net.train()
    if not (frozen_backbone or batchnorm == "frozen"):
        return
    kinds = NORMS if frozen_backbone else nn.modules.batchnorm._BatchNorm
    for name, module in net.named_modules():
        if in_head(name, head):
            continue
        if isinstance(module, kinds):
            module.eval()


def sync_batchnorm(net: nn.Module, device: torch.device) -> nn.Module:
    """BatchNorm over the global batch (every process's statistics combined)."""
    if device.type != "cuda":
        raise ConfigError(
            "batchnorm=sync needs GPUs (PyTorch's SyncBatchNorm has no CPU kernels)",
            "use batchnorm=batch or batchnorm=frozen on CPUs.",
        )
    return nn.SyncBatchNorm.convert_sync_batchnorm(net)


def initial_seed(seed: int) -> None:
    torch.manual_seed(seed)
