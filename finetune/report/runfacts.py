"""RunFacts: one finished run as the report needs it (the run ledger builds these)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime

from finetune.catalog import instances
from finetune.contracts.metrics import EpochMetrics
from finetune.errors import UsageError
from finetune.estimate.money import Money


@dataclass(frozen=True)
class RunFacts:
    """Facts of one finished run: what ran where, for how long, how fast, at what price.

    ``steady_images_per_sec`` is all GPUs together with warm-up excluded; when None it is
    taken from the epochs' metrics. ``money`` is what the run cost (estimate.money.euros over
    the charges its backend reported), with the prices and the EUR rate behind it.
    """

    run_id: str
    recipe: str
    dataset: str
    model: str
    backend: str  # local | ec2 | sagemaker
    instance_type: str
    hosts: int
    devices_per_host: int
    spot: bool
    region: str
    started_at: datetime
    wall_seconds: float
    steady_images_per_sec: float | None
    epochs: tuple[EpochMetrics, ...]
    money: Money
    gpu_model: str = ""  # filled from the catalog when empty (unknown types keep the family)
    status: str = "completed"
    engine: str = ""  # mxnet | torch ("" when the record does not say)
    batch_per_device: int | None = None
    image_size: int | None = None
    device_kind: str = "gpu"  # gpu | cpu: a CPU run is never counted in GPU-hours
    sweep_values: tuple[tuple[str, str], ...] = ()  # the `finetune sweep` cell's grid values

    def __post_init__(self) -> None:
        # Ledgers hand over lists; a frozen record keeps an immutable tuple.
        object.__setattr__(self, "epochs", tuple(self.epochs))
        object.__setattr__(self, "sweep_values", tuple(tuple(v) for v in self.sweep_values))
        if not self.gpu_model:
            object.__setattr__(self, "gpu_model", _gpu_model(self.instance_type))

    @property
    def devices(self) -> int:
        return self.hosts * self.devices_per_host

    @property
    def billable_seconds(self) -> float:
        """Seconds billed per instance (0 for a run that costs nothing)."""
        return self.money.billed_seconds

    @property
    def images_per_sec(self) -> float | None:
        """Steady-state throughput, all GPUs: as recorded, else the median epoch's."""
        if self.steady_images_per_sec:
            return self.steady_images_per_sec
        rates = [e.samples_per_sec for e in self.epochs if e.samples_per_sec > 0]
        return statistics.median(rates) if rates else None

    @property
    def images_per_sec_per_device(self) -> float | None:
        ips = self.images_per_sec
        return ips / self.devices if ips and self.devices else None

    @property
    def best_val_acc(self) -> float | None:
        accs = [e.val_acc for e in self.epochs if e.val_acc is not None]
        return max(accs) if accs else None


def _gpu_model(instance_type: str) -> str:
    try:
        return instances.get(instance_type).gpu_model
    except UsageError:
        return instances.canonical_name(instance_type).split(".", 1)[0]
