"""The network: a torchvision ResNet, ImageNet weights loaded unchanged, a new head.

The weights are loaded into a network built with the file's own head size (1000 classes for
ImageNet), then ``fc`` is replaced by a fresh Linear layer for the dataset's classes. A frozen
backbone gets no gradients and its BatchNorm layers stay in eval mode (they normalise with
the stored statistics and never update them); the head learns at ``head_lr_mult`` x the rate.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from finetune.contracts.hparams import TrainHyperparameters
from finetune.errors import ConfigError, DataError
from finetune.train.engines.models import check_model
from finetune.train.engines.torch import weights as wt

log = logging.getLogger(__name__)


def build(hp: TrainHyperparameters, found: wt.Found | None) -> tuple[nn.Module, dict]:
    """The network for ``hp`` and what was loaded (file, sha256, variant) for the record."""
    from torchvision import models

    check_model("torch", hp.model)
    loaded: dict = {}
    if found is None:
        net = models.get_model(hp.model, weights=None, num_classes=hp.num_classes)
    else:
        digest = wt.verify(found, hp.weights_sha256)
        state = wt.load_state(found)
        head = state.get("fc.weight")
        if head is None or head.ndim != 2:
            raise DataError(
                f"{found.path} has no fc.weight: it is not a torchvision ResNet state_dict",
                f"use torchvision's {hp.model} weights (e.g. {hp.model}-<hash>.pth).",
            )
        net = models.get_model(hp.model, weights=None, num_classes=head.shape[0])
        try:
            net.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise DataError(
                f"weights {found.path} do not fit {hp.model}: {str(exc).splitlines()[0]}",
                f"use the weights of {hp.model} itself (the same depth).",
            ) from None
        net.fc = nn.Linear(net.fc.in_features, hp.num_classes)
        loaded = {"file": str(found.path), "sha256": digest, "variant": found.variant}
        log.info("loaded %s (%s), head replaced for %d classes", found.path, digest[:12],
                 hp.num_classes)  # fmt: skip
    if hp.freeze_backbone:
        for name, param in net.named_parameters():
            param.requires_grad = name.startswith("fc.")
    return net, loaded


def param_groups(net: nn.Module, hp: TrainHyperparameters) -> list[dict]:
    """Backbone and head as two optimizer groups; ``lr_mult`` scales each group's rate."""
    head = [p for n, p in net.named_parameters() if n.startswith("fc.") and p.requires_grad]
    body = [p for n, p in net.named_parameters() if not n.startswith("fc.") and p.requires_grad]
    groups = [{"params": head, "lr_mult": hp.head_lr_mult}]
    if body:
        groups.insert(0, {"params": body, "lr_mult": 1.0})
    return groups


def train_mode(net: nn.Module, frozen_backbone: bool, batchnorm: str = "batch") -> None:
    """Training mode, except BatchNorm of a frozen backbone or with ``batchnorm=frozen``
    (kept in eval mode: stored statistics, never updated)."""
    net.train()
    if frozen_backbone or batchnorm == "frozen":
        for name, module in net.named_modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm) and not name.startswith("fc"):
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
