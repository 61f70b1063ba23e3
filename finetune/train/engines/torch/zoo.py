"""timm's networks (``timm/<model>``, finetune.engines.timmzoo): built by timm for the run's
image size and classes, the pretrained weights given to timm's own loader (its checkpoint
filters: a ViT's position embeddings resampled to the size...) with the file's classifier
left out, so the head is a fresh one for the dataset's classes."""

from __future__ import annotations

import logging
from pathlib import Path

from torch import nn

from finetune.engines import timmzoo
from finetune.errors import DataError
from finetune.train.engines.torch import hub

log = logging.getLogger(__name__)


def heads(model: str) -> tuple[str, ...]:
    """The dotted paths of ``model``'s classifier (its pretrained config's; a distilled ViT
    has two)."""
    named = timmzoo.pretrained_cfg(model).get("classifier") or "head"
    return (named,) if isinstance(named, str) else tuple(named)


def construct(model: str, num_classes: int, image_size: int) -> nn.Module:
    """timm's ``model`` with random weights and ``num_classes`` outputs at ``image_size``."""
    import timm  # deferred: a second of imports, only for timm models

    kwargs = timmzoo.size_kwargs(model, image_size)
    return timm.create_model(timmzoo.timm_name(model), num_classes=num_classes, **kwargs)


def pretrained(model: str, num_classes: int, image_size: int, path: Path, own: bool) -> nn.Module:
    """``model`` with the weights of ``path`` and a fresh head of ``num_classes``; ``own``:
    a file the user gave, whose names must be the network's (the hub's files are timm's)."""
    import timm  # deferred: a second of imports, only for timm models

    state = hub.load_state(path)
    for head in heads(model):
        for key in [k for k in state if k.startswith(head + ".")]:
            del state[key]
    if own:
        _check_names(model, state, path, timmzoo.meta_network(model, image_size, num_classes))
    overlay = {"state_dict": state, "num_classes": 0}  # 0: timm drops the file's classifier
    kwargs = timmzoo.size_kwargs(model, image_size)
    try:
        return timm.create_model(timmzoo.timm_name(model), pretrained=True, num_classes=num_classes,
                                 pretrained_cfg_overlay=overlay, **kwargs)  # fmt: skip
    except RuntimeError as exc:  # load_state_dict: shapes that do not fit
        raise DataError(
            f"weights {path} do not fit {model}: {str(exc).splitlines()[0][:200]}",
            f"use the weights of {model} itself (the same architecture and size).",
        ) from None


def _check_names(model: str, state: dict, path: Path, net: nn.Module) -> None:
    """DataError when the file's parameter names are not the network's (timm would leave
    the missing ones at random and say so only in its log)."""
    classifier = tuple(h + "." for h in heads(model))
    wanted = {k for k in net.state_dict() if not k.startswith(classifier)}
    missing, extra = sorted(wanted - set(state)), sorted(set(state) - wanted)
    if missing or extra:
        first = f"missing {missing[0]}" if missing else f"unexpected {extra[0]}"
        raise DataError(
            f"weights {path} do not fit {model} ({len(missing)} missing, {len(extra)} "
            f"unexpected names; {first})",
            f"use a state_dict of {model} itself (e.g. the model.pt of a finished run).",
        )
