"""The hyperparameters for the devices and hosts a run actually finds: the linear scaling
rule (finetune.recipes.lr_scaling) applied again when they differ from the plan (a restart on
fewer GPUs, a cluster that came up smaller)."""

from __future__ import annotations

import logging

from finetune.contracts.hparams import TrainHyperparameters
from finetune.recipes import lr_scaling

log = logging.getLogger(__name__)


def rescale(
    hp: TrainHyperparameters, devices: int, hosts: int
) -> tuple[TrainHyperparameters, str | None]:
    """The hyperparameters for the devices and hosts actually found: the linear scaling rule
    (finetune.recipes.lr_scaling) applied again from ``lr_per_device`` when they differ from
    the plan; (hp, the note saying so, or None)."""
    if (devices, hosts) == (hp.devices_per_host, hp.hosts):
        return hp, None
    update = {
        "devices_per_host": devices,
        "hosts": hosts,
        "global_batch": lr_scaling.global_batch(hp.batch_per_device, devices, hosts),
        "lr": lr_scaling.scaled_lr(hp.lr_per_device, devices, hosts),
    }
    note = (
        f"planned {hp.devices_per_host} device(s) x {hp.hosts} host(s), found {devices} x "
        f"{hosts}: global batch {hp.global_batch} -> {update['global_batch']}, "
        f"lr {hp.lr:g} -> {update['lr']:g} (linear scaling rule from lr_per_device)"
    )
    log.warning("%s", note)
    return hp.model_copy(update=update), note
