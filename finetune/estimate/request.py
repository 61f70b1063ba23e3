"""What an estimate is asked for: the work (network, engine, precision, batch, image size) and
where and how long it runs. The caller resolves the engine's spec once (plan.estimate); the
estimate room never looks an engine up by name."""

from __future__ import annotations

from dataclasses import dataclass, field

from finetune.engines.descriptor import Engine
from finetune.engines.torch import TORCH

# Instance start, image pull and data download before the first batch. An assumption, not a
# measurement: measured runs in the ledger show the real figure for a given setup.
DEFAULT_OVERHEAD_SECONDS = 300.0


@dataclass(frozen=True)
class Workload:
    """What is trained: the recipe's network, engine, precision, batch and image size."""

    model: str
    engine: Engine = field(default=TORCH)
    precision: str = "auto"  # a recipe's train.precision; an engine may fix its own
    batch_per_device: int = 32
    image_size: int = 224
    compile: bool = False  # a recipe's train.compile (torch)


@dataclass(frozen=True)
class EstimateRequest:
    """One estimate: ``work`` on ``hosts`` x ``instance_type`` at ``price_book``'s prices in
    ``region``, ``epochs`` over ``images_per_epoch`` images (``other_images``, validation and
    test, count towards what the engine keeps decoded)."""

    work: Workload
    instance_type: str
    region: str
    images_per_epoch: int
    epochs: int
    hosts: int = 1
    price_book: str = "ec2"  # the catalog's price book: ec2 | sagemaker
    spot: bool = False
    other_images: int = 0
    checkpoint_interval_s: float | None = None  # spot: lost work between checkpoints
    overhead_seconds: float = DEFAULT_OVERHEAD_SECONDS
