"""The linear scaling rule and the learning-rate schedule, as pure functions.

Goyal et al. 2017 ("Accurate, Large Minibatch SGD"): when the minibatch grows k-fold, grow
the learning rate k-fold too, and ramp up to it linearly over the first epochs ("gradual
warmup") starting from the rate of one worker. Here one worker is one device, so with
``devices`` devices on each of ``hosts`` hosts::

    global batch = batch per device x devices x hosts
    lr           = lr per device    x devices x hosts

``launch`` uses these to derive the hyperparameters; the trainer calls :class:`LrSchedule`
(through :meth:`LrSchedule.from_hparams`) every step, so this module imports only the
standard library and ``finetune.errors``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from finetune.errors import ConfigError

if TYPE_CHECKING:  # the trainer imports this module: it stays standard library at run time
    from finetune.contracts.hparams import TrainHyperparameters

KINDS = ("constant", "step", "cosine")


def _check_counts(devices_per_host: int, hosts: int) -> int:
    if devices_per_host < 1 or hosts < 1:
        raise ConfigError(
            f"devices per host ({devices_per_host}) and hosts ({hosts}) must be at least 1",
            "pick an instance with at least one device and an instance count of 1 or more.",
        )
    return devices_per_host * hosts


def global_batch(batch_per_device: int, devices_per_host: int, hosts: int = 1) -> int:
    """Samples per optimisation step over all devices of all hosts."""
    return batch_per_device * _check_counts(devices_per_host, hosts)


def scaled_lr(lr_per_device: float, devices_per_host: int, hosts: int = 1) -> float:
    """The linear scaling rule: the per-device learning rate times the number of devices."""
    return lr_per_device * _check_counts(devices_per_host, hosts)


def check_float32(values: Mapping[str, float]) -> None:
    """ConfigError unless every value survives float32, the precision both engines train in:
    finite, within +-3.4e38, and not rounded to zero. (lr=1e308 is a fine float64; as a
    float32 it is inf, and the first step makes every weight NaN.)"""
    for name, value in values.items():
        try:
            single = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:  # beyond float32's range
            single = math.inf
        if math.isfinite(single) and (single != 0 or value == 0):
            continue
        why = "rounds to 0" if math.isfinite(single) else "overflows to infinity"
        raise ConfigError(
            f"{name} = {value:g} {why} in float32, the precision the engines train in "
            f"(finite float32 values lie within +-{FLOAT32_MAX:.7g}; the smallest is "
            f"{FLOAT32_TINY:.3g})",
            "use a value within that range (a learning rate is usually between 1e-5 and 1).",
        )


def check_rates(lr_per_device: float, lr: float, devices: int, head_mult: float, wd: float):
    """check_float32 of the rates a run trains with, named as a recipe names them."""
    check_float32(
        {
            "optimizer.lr_per_device": lr_per_device,
            f"the scaled learning rate (lr_per_device x {devices} devices)": lr,
            "the head's learning rate (lr x model.head_lr_mult)": lr * head_mult,
            "optimizer.wd": wd,
        }
    )


FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.401298464324817e-45  # the smallest positive (subnormal) float32


def steps_per_epoch(num_samples: int, global_batch: int, max_batches: int = 0) -> int:
    """Optimisation steps in one epoch: full batches only (the last partial batch is left
    out, as PyTorch's drop_last does; the order is shuffled every epoch, so every image is
    still seen). Padding a partial batch would train on repeated images whose choice MXNet's
    ImageRecordIter makes by thread timing -- the run would not be reproducible. A dataset
    smaller than one batch still takes one (padded) step. ``max_batches`` > 0 caps it."""
    if num_samples < 1 or global_batch < 1:
        raise ConfigError(
            f"cannot train {num_samples} samples in batches of {global_batch}",
            "use a prepared dataset with training images and a positive batch size.",
        )
    steps = max(1, num_samples // global_batch)
    return min(steps, max_batches) if max_batches > 0 else steps


def warmup_steps(warmup_epochs: float, steps_per_epoch: int) -> int:
    """Warmup length in steps (rounded, so a warmup given in steps survives the round trip)."""
    return round(warmup_epochs * steps_per_epoch)


def warmup_epochs_from_steps(steps: int, steps_per_epoch: int) -> float:
    """Warmup given in steps, expressed in epochs (what a plan shows beside the steps)."""
    return steps / steps_per_epoch


@dataclass(frozen=True)
class LrSchedule:
    """The learning rate at every step: linear warmup, then constant, step or cosine decay.

    ``lr`` is the scaled (peak) rate, ``warmup_begin_lr`` the rate of one device, where the
    warmup starts (Goyal et al.); with one device the warmup is therefore flat.
    ``decay_epochs`` are the epochs at which a step schedule multiplies the rate by
    ``factor``; cosine decays from ``lr`` to 0 over the steps after the warmup.
    """

    lr: float
    steps_per_epoch: int
    epochs: int
    kind: str = "step"
    decay_epochs: tuple[float, ...] = ()
    factor: float = 0.1
    warmup_steps: int = 0
    warmup_begin_lr: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(
                f"unknown learning-rate schedule {self.kind!r}",
                f"use one of {', '.join(KINDS)}.",
            )

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.epochs

    def at_step(self, step: int) -> float:
        """The rate for the update with 0-based global index ``step``."""
        target = self._decayed(step)
        if step < self.warmup_steps:
            begin = min(self.warmup_begin_lr, target)
            return begin + (target - begin) * step / self.warmup_steps
        return target

    def at_epoch(self, epoch: float) -> float:
        """The rate at the (possibly fractional) epoch ``epoch`` -- e.g. for the metrics log."""
        return self.at_step(math.floor(epoch * self.steps_per_epoch + 1e-9))

    def _decayed(self, step: int) -> float:
        if self.kind == "step":
            epoch = step / self.steps_per_epoch
            passed = sum(1 for e in self.decay_epochs if epoch + 1e-9 >= e)
            return self.lr * self.factor**passed
        if self.kind == "cosine":
            span = max(1, self.total_steps - self.warmup_steps)
            t = min(1.0, max(0.0, (step - self.warmup_steps) / span))
            return self.lr * 0.5 * (1.0 + math.cos(math.pi * t))
        return self.lr

    @classmethod
    def from_hparams(cls, hp: TrainHyperparameters, steps_per_epoch: int) -> LrSchedule:
        """The schedule a TrainHyperparameters describes."""
        return cls(
            lr=hp.lr,
            steps_per_epoch=steps_per_epoch,
            epochs=hp.epochs,
            kind=hp.lr_schedule,
            decay_epochs=tuple(hp.lr_steps),
            factor=hp.lr_factor,
            # a warmup given in steps is used as given; one in epochs is converted here, once,
            # with the steps per epoch of the devices found
            warmup_steps=hp.warmup_steps or warmup_steps(hp.warmup_epochs, steps_per_epoch),
            warmup_begin_lr=hp.lr_per_device,
        )
