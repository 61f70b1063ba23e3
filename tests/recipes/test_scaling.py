"""The linear scaling rule and the lr schedule, against hand-computed oracle values."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from finetune.contracts.hparams import TrainHyperparameters
from finetune.errors import ConfigError
from finetune.recipes import lr_scaling
from finetune.recipes.lr_scaling import LrSchedule


@pytest.mark.parametrize(
    ("devices", "hosts", "batch", "lr"),
    [(1, 1, 16, 0.00125), (4, 1, 64, 0.005), (8, 1, 128, 0.01), (8, 2, 256, 0.02)],
)
def test_linear_scaling_rule(devices, hosts, batch, lr):
    assert lr_scaling.global_batch(16, devices, hosts) == batch
    assert lr_scaling.scaled_lr(0.00125, devices, hosts) == pytest.approx(lr)


def test_zero_devices_is_a_config_error():
    with pytest.raises(ConfigError, match="at least 1"):
        lr_scaling.global_batch(16, 0)


@pytest.mark.parametrize(
    ("samples", "batch", "cap", "steps"),
    [
        (15420, 128, 0, 120),
        (15360, 128, 0, 120),
        (80, 8, 0, 10),
        (84, 8, 0, 10),
        (80, 8, 3, 3),
        (5, 8, 0, 1),
    ],
)
def test_steps_per_epoch_counts_full_batches_only(samples, batch, cap, steps):
    assert lr_scaling.steps_per_epoch(samples, batch, cap) == steps


def test_warmup_steps_round_trip_through_epochs():
    for steps, spe in [(50, 7), (1, 121), (0, 3), (363, 121)]:
        epochs = lr_scaling.warmup_epochs_from_steps(steps, spe)
        assert lr_scaling.warmup_steps(epochs, spe) == steps


def test_step_schedule_with_goyal_warmup():
    sched = LrSchedule(
        lr=0.01, steps_per_epoch=10, epochs=6, kind="step", decay_epochs=(4, 5),
        factor=0.1, warmup_steps=10, warmup_begin_lr=0.00125,
    )  # fmt: skip
    expect = {0: 0.00125, 5: 0.005625, 9: 0.009125, 10: 0.01, 39: 0.01, 40: 0.001, 50: 0.0001}
    for step, lr in expect.items():
        assert sched.at_step(step) == pytest.approx(lr), step
    assert sched.at_epoch(4.0) == pytest.approx(0.001)
    assert sched.at_epoch(3.95) == pytest.approx(0.01)


def test_cosine_schedule_after_warmup():
    sched = LrSchedule(lr=0.1, steps_per_epoch=10, epochs=2, kind="cosine", warmup_steps=4)
    assert sched.at_step(0) == 0.0  # warmup from 0 when no begin rate is given
    assert sched.at_step(2) == pytest.approx(0.05)
    assert sched.at_step(4) == pytest.approx(0.1)
    assert sched.at_step(12) == pytest.approx(0.05)  # half-way through the 16 decay steps
    assert sched.at_step(8) == pytest.approx(0.05 * (1 + math.cos(math.pi / 4)))
    assert sched.at_step(20) == pytest.approx(0.0)
    assert sched.at_step(99) == pytest.approx(0.0)


def test_constant_schedule_and_flat_warmup_on_one_device():
    sched = LrSchedule(lr=0.01, steps_per_epoch=5, epochs=3, kind="constant",
                       warmup_steps=5, warmup_begin_lr=0.01)  # fmt: skip
    assert {sched.at_step(s) for s in range(15)} == {0.01}


def test_unknown_kind():
    with pytest.raises(ConfigError, match="unknown learning-rate schedule"):
        LrSchedule(lr=0.1, steps_per_epoch=1, epochs=1, kind="linear")


def test_from_hparams_matches_the_contract():
    hp = TrainHyperparameters(
        num_classes=257, num_training_samples=15420, epochs=6, batch_per_device=16,
        devices_per_host=8, global_batch=128, lr_per_device=0.00125, lr=0.01,
        lr_schedule="step", lr_steps=(4,), warmup_epochs=1.0,
    )  # fmt: skip
    sched = LrSchedule.from_hparams(hp, steps_per_epoch=121)
    assert (sched.warmup_steps, sched.warmup_begin_lr, sched.total_steps) == (121, 0.00125, 726)
    assert sched.at_step(121) == pytest.approx(0.01)
    assert sched.at_step(4 * 121) == pytest.approx(0.001)


def test_scaling_imports_only_the_standard_library():
    code = (
        "import sys, finetune.recipes.lr_scaling; "
        "bad = [m for m in ('pydantic', 'yaml', 'numpy', 'mxnet') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
