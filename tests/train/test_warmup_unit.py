"""The warmup reaches the trainer in the unit the recipe gave it, so a run rescaled to other
devices (other steps per epoch) warms up for the recipe's steps, or its epochs, exactly."""

from __future__ import annotations

import pytest

from finetune.contracts.hparams import TrainHyperparameters
from finetune.plan import Resources, build_plan
from finetune.recipes import lr_scaling
from finetune.recipes.lr_scaling import LrSchedule
from finetune.train.rescale import rescale

EIGHT = Resources(backend="sagemaker", instance_type="ml.p3.8xlarge", hosts=2,
                  devices_per_host=4, device="gpu")  # fmt: skip


def _warmup_after_rescale(plan, devices: int, hosts: int) -> tuple[int, int]:
    """(warmup steps, steps per epoch) of the trainer's schedule on the devices found."""
    hp, note = rescale(plan.hyperparameters, devices, hosts)
    assert note  # it did rescale
    spe = lr_scaling.steps_per_epoch(
        hp.num_training_samples, hp.global_batch, hp.max_batches_per_epoch
    )
    return LrSchedule.from_hparams(hp, spe).warmup_steps, spe


def test_warmup_in_steps_keeps_its_step_count_after_a_rescale(tiny_dataset):
    plan = build_plan(
        "smoke-resnet18", tiny_dataset, EIGHT, ["batch_per_device=2", "warmup_steps=3"]
    )
    assert (plan.hyperparameters.warmup_steps, plan.hyperparameters.warmup_epochs) == (3, 0.0)
    assert plan.derived.steps_per_epoch == 5  # planned: 0.6 epochs
    steps, spe = _warmup_after_rescale(plan, devices=1, hosts=1)
    assert spe == 40  # found one device: 0.6 epochs would now be 24 steps
    assert steps == 3


def test_warmup_in_epochs_keeps_its_epoch_count_after_a_rescale(tiny_dataset):
    plan = build_plan(
        "smoke-resnet18", tiny_dataset, EIGHT, ["batch_per_device=2", "warmup_epochs=1"]
    )
    assert (plan.hyperparameters.warmup_steps, plan.hyperparameters.warmup_epochs) == (0, 1.0)
    assert plan.derived.warmup_steps == 5
    steps, spe = _warmup_after_rescale(plan, devices=1, hosts=1)
    assert (steps, spe) == (40, 40)  # one epoch of the devices found


def test_the_contract_carries_one_warmup_unit_and_reads_old_maps():
    base = dict(num_classes=3, num_training_samples=10, epochs=2, batch_per_device=2,
                global_batch=2, lr_per_device=0.1, lr=0.1)  # fmt: skip
    with pytest.raises(ValueError, match="warmup_epochs or warmup_steps"):
        TrainHyperparameters(**base, warmup_epochs=0.5, warmup_steps=3)
    hp = TrainHyperparameters(**base, warmup_steps=3)
    assert TrainHyperparameters.from_strings(hp.to_strings()) == hp
    # a map written before warmup_steps travelled: epochs, converted by the trainer
    old = {k: v for k, v in TrainHyperparameters(**base, warmup_epochs=0.5).to_strings().items()
           if k != "warmup_steps"}  # fmt: skip
    assert LrSchedule.from_hparams(TrainHyperparameters.from_strings(old), 10).warmup_steps == 5
