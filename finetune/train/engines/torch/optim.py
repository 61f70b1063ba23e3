"""The optimizer's parameter groups and step extras: timm's layer-wise learning-rate decay
(its group_matcher: a timm model's own, a torchvision family's here) and its weight decay
without norms and biases, AdamW, gradient clipping (docs/trainer.md: parameter groups)."""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from finetune.errors import ConfigError
from finetune.train.engines.torch import network, precision

HEADS = ("fc", "classifier", "head", "heads")
NECK = 1e9  # ordinal of a norm between the blocks and the head (after every block)
# torchvision's families as timm's group matchers (regex per group; unmatched: the head)
RESNET = {"stem": r"^conv1|^bn1", "blocks": r"^layer(\d+)"}
VIT = {"stem": r"^conv_proj|^class_token|^encoder\.pos_embedding",
       "blocks": [(r"^encoder\.layers\.encoder_layer_(\d+)", None),
                  (r"^encoder\.ln", (NECK,))]}  # fmt: skip


def param_groups(net: nn.Module, hp) -> list[dict]:
    """The optimizer's groups: as before (backbone, head) unless layer decay or weight decay
    without norms and biases asks for timm's; each has ``lr_mult`` and ``weight_decay``."""
    if hp.layer_decay == 1.0 and hp.wd_norm_bias:
        return network.param_groups(net, hp)
    # timm's import registers ~1,400 models (seconds): only runs with these features pay it
    from timm.optim import param_groups_layer_decay, param_groups_weight_decay

    exclude = not hp.wd_norm_bias
    keep = getattr(net, "no_weight_decay", lambda: ())() if exclude else ()  # a timm ViT's tokens
    if hp.layer_decay == 1.0:
        groups = param_groups_weight_decay(net, hp.wd, no_weight_decay_list=keep)
    else:
        seen = cast(nn.Module, _Matched(net))  # (timm reads its parameters and matcher only)
        groups = param_groups_layer_decay(seen, hp.wd, no_weight_decay_list=keep,
                                          weight_decay_exclude_1d=exclude,
                                          layer_decay=hp.layer_decay)  # fmt: skip
    paths, out = network.heads(hp.model), []
    names = {id(p): n for n, p in net.named_parameters()}
    for g in groups:  # the replaced head apart: it also learns at head_lr_mult
        scale = g.get("lr_scale", 1.0)
        for head in (False, True):
            params = [p for p in g["params"] if network.in_head(names[id(p)], paths) == head]
            mult = scale * (hp.head_lr_mult if head else 1.0)
            if params:
                out.append({"params": params, "lr_mult": mult, "weight_decay": g["weight_decay"]})
    return out


class _Matched:
    """A network as timm's layer-decay groups see it: its parameters and a group_matcher
    (a timm model's own; a torchvision family's by its module names)."""

    def __init__(self, net: nn.Module) -> None:
        self.net, self.matcher = net, matcher(net)

    def named_parameters(self):
        return self.net.named_parameters()

    def group_matcher(self, coarse: bool = False):
        return self.matcher


def matcher(net: nn.Module):
    """timm's group_matcher of ``net``: layer ordinals from the input up (the head last)."""
    own = getattr(net, "group_matcher", None)  # a timm model's
    if own is not None:
        return own(coarse=False)
    names = [n for n, _ in net.named_parameters()]
    if any(n.startswith("layer1.") for n in names):  # ResNet: by stage
        return RESNET
    if any(n.startswith("encoder.layers.") for n in names):  # ViT: by encoder block
        return VIT
    if "features" in dict(net.named_children()):  # ConvNeXt, Swin, EfficientNet, MobileNet
        return _by_block(net.get_submodule("features"))
    raise ConfigError(
        f"optimizer.layer_decay: no layer order known for {type(net).__name__}",
        "set optimizer.layer_decay=1 for this model (layer-wise decay knows timm's models, "
        "ResNets, ViTs and the features.N networks such as ConvNeXt and Swin).",
    )


def _by_block(features: nn.Module):
    """``features.i[.j]``: one layer per block (``features.i.j`` where ``features.i`` holds
    blocks, else ``features.i``), a norm after the features next, the head last."""

    def ordinal(name: str) -> tuple[float, ...]:
        parts = name.split(".")
        if parts[0] != "features":
            return (math.inf,) if parts[0] in HEADS else (NECK,)
        kids = [n for n, c in features.get_submodule(parts[1]).named_children()
                if any(True for _ in c.children())]  # fmt: skip
        holds = len(kids) == len(list(features.get_submodule(parts[1]).children())) > 0
        return (int(parts[1]), kids.index(parts[2])) if holds else (int(parts[1]),)

    return ordinal


def layer_depths(net: nn.Module) -> dict[str, int]:
    """Parameter name -> depth counted from the head (0), as timm's groups order them."""
    from timm.models import group_parameters  # (timm's import: see param_groups)

    ids = group_parameters(net, matcher(net), reverse=True)
    top = max(ids.values())
    return {n: top - i for n, i in ids.items()}


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
