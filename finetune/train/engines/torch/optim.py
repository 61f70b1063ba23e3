"""The optimizer's parameter groups and step extras: layer-wise learning-rate decay (depths
from torchvision's module names), weight decay without norm layers and biases, AdamW,
gradient clipping (docs/trainer.md: parameter groups and layer-wise decay)."""

from __future__ import annotations

import re

import torch
from torch import nn

from finetune.errors import ConfigError
from finetune.train.engines.torch import network, precision

HEADS = ("fc", "classifier", "head", "heads")
NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.LocalResponseNorm,
         nn.modules.instancenorm._InstanceNorm)  # fmt: skip


def param_groups(net: nn.Module, hp) -> list[dict]:
    """The optimizer's groups: as before (backbone, head) unless layer decay or weight decay
    without norms and biases asks for more; each group has ``lr_mult`` and
    ``weight_decay``."""
    if hp.layer_decay == 1.0 and hp.wd_norm_bias:
        return network.param_groups(net, hp)
    depths = layer_depths(net) if hp.layer_decay != 1.0 else None
    plain = no_decay_names(net) if not hp.wd_norm_bias else set()
    groups: dict[tuple[int, bool], dict] = {}
    new_head = network.head_path(hp.model) + "."  # the replaced layer learns at head_lr_mult
    for name, param in net.named_parameters():
        if not param.requires_grad:
            continue
        head = name.startswith(new_head)
        depth = depths[name] if depths is not None else (0 if head else 1)  # (depth 0: the
        # top-level head module, e.g. a ConvNeXt classifier's norm beside the new layer)
        decays = name not in plain
        group = groups.get((depth, decays))
        if group is None:
            mult = hp.layer_decay**depth * (hp.head_lr_mult if head else 1.0)
            group = {"params": [], "lr_mult": mult, "weight_decay": hp.wd if decays else 0.0,
                     "depth": depth}  # fmt: skip
            groups[(depth, decays)] = group
        group["params"].append(param)
    return [groups[k] for k in sorted(groups, key=lambda k: (-k[0], not k[1]))]


def no_decay_names(net: nn.Module) -> set[str]:
    """Parameters weight decay leaves alone: every parameter of a normalisation layer, and
    every bias."""
    names = set()
    for prefix, module in net.named_modules():
        for pname, _ in module.named_parameters(recurse=False):
            if isinstance(module, NORMS) or pname == "bias":
                names.add(f"{prefix}.{pname}" if prefix else pname)
    return names


def layer_depths(net: nn.Module) -> dict[str, int]:
    """Parameter name -> depth counted from the head (0), for the families the module
    docstring lists; a ConfigError for a network of another shape."""
    names = [n for n, _ in net.named_parameters()]
    ids = _layer_ids(net, names)
    unknown = [n for n in names if n not in ids]
    if unknown:
        raise ConfigError(
            f"optimizer.layer_decay: no depth known for {unknown[0]} of {type(net).__name__}",
            "set optimizer.layer_decay=1 for this model (layer-wise decay knows ResNets, "
            "ViTs and the features.N networks such as ConvNeXt and Swin).",
        )
    top = max(ids.values())
    return {n: top - i for n, i in ids.items()}


def _layer_ids(net: nn.Module, names: list[str]) -> dict[str, int]:
    """Parameter name -> layer number from the input (0) up to the head (the largest)."""
    heads = [n for n in names if n.split(".")[0] in HEADS]
    body = [n for n in names if n not in heads]
    if any(n.startswith("layer1.") for n in body):  # ResNet: by stage
        ids = {n: int(m.group(1)) if (m := re.match(r"layer(\d+)\.", n)) else 0 for n in body}
    elif any(n.startswith("encoder.layers.") for n in body):  # ViT: by encoder block
        blocks = _ordered(re.match(r"encoder\.layers\.[^.]+", n) for n in body)
        ids = {}
        for n in body:
            m = re.match(r"encoder\.layers\.[^.]+", n)
            if m:
                ids[n] = blocks[m.group(0)] + 1
            else:  # the embeddings below the blocks, the final norm above them
                ids[n] = len(blocks) + 1 if n.startswith("encoder.ln.") else 0
    elif any(n.startswith("features.") for n in body):
        ids = _feature_ids(net, body)
    else:
        return {}
    last = max(ids.values(), default=0)
    ids.update({n: last + 1 for n in heads})
    return ids


def _feature_ids(net: nn.Module, body: list[str]) -> dict[str, int]:
    """``features.i[.j]`` networks: one layer per block, norms after the features on top."""
    features = dict(net.named_children())["features"]

    def block(name: str) -> str | None:
        parts = name.split(".")
        if parts[0] != "features":
            return None
        stage = features.get_submodule(parts[1])  # a Sequential's children: "0", "1", ...
        children = list(stage.named_children())
        holds_blocks = children and all(any(True for _ in c.children()) for _, c in children)
        return ".".join(parts[:3] if holds_blocks else parts[:2])

    keys = {n: block(n) for n in body}
    order = _ordered(keys.values())
    top = len(order)
    return {n: order[k] if k is not None else top for n, k in keys.items()}


def _ordered(items) -> dict[str, int]:
    """Distinct keys (strings or regex matches; None skipped) -> their place, in order."""
    out: dict[str, int] = {}
    for item in items:
        key = item.group(0) if isinstance(item, re.Match) else item
        if key is not None and key not in out:
            out[key] = len(out)
    return out


def optimizer(groups: list[dict], hp) -> torch.optim.Optimizer:
    """SGD, NAG and Adam as precision.optimizer makes them (Adam with ``betas``), AdamW
    with ``betas``; fused kernels where torch has them."""
    if hp.optimizer not in ("adam", "adamw"):
        return precision.optimizer(groups, hp)
    make = torch.optim.AdamW if hp.optimizer == "adamw" else torch.optim.Adam
    kwargs = {"lr": 0.0, "weight_decay": hp.wd, "betas": tuple(hp.betas), "fused": True}
    try:
        return make(groups, **kwargs)
    except (TypeError, RuntimeError):  # an older torch without the fused kernel
        kwargs.pop("fused")
        return make(groups, **kwargs)


def clip(scaler: torch.amp.GradScaler, opt: torch.optim.Optimizer, max_norm: float):
    """Gradients scaled down to a total norm of at most ``max_norm`` (none when 0); with
    fp16 the scaler unscales them first, so the norm is the true one. Returns the norm
    before clipping (None when off)."""
    if max_norm <= 0:
        return None
    scaler.unscale_(opt)  # (a no-op for a disabled scaler)
    params = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
    return torch.nn.utils.clip_grad_norm_(params, max_norm)
