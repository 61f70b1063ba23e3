"""Test data for reports: RunFacts with every field defaulted, and epoch metrics."""

from __future__ import annotations

from datetime import date, datetime

from finetune.metrics import EpochMetrics
from finetune.report.model import RunFacts


def epochs(seconds: list[float], val_accs: list[float], images_per_sec: float = 100.0):
    """Epoch metrics with the given durations and validation accuracies."""
    return [
        EpochMetrics(
            epoch=i,
            samples=int(images_per_sec * s),
            samples_per_sec=images_per_sec,
            epoch_seconds=s,
            train_loss=1.0 / (i + 1),
            train_acc=acc,
            val_acc=acc,
            lr=0.01,
        )
        for i, (s, acc) in enumerate(zip(seconds, val_accs, strict=True))
    ]


def make_run(**kw) -> RunFacts:
    """A finished run; keyword arguments override the defaults (1 h of p3.2xlarge, rate 1.2)."""
    base = dict(
        run_id="run",
        recipe="caltech256-resnet152",
        dataset="caltech256",
        model="imagenet11k-resnet-152",
        backend="ec2",
        instance_type="p3.2xlarge",
        instance_count=1,
        gpus_per_instance=1,
        spot=False,
        region="us-east-1",
        started_at=datetime(2026, 3, 1, 12, 0),
        wall_seconds=3600.0,
        billable_seconds=3600.0,
        steady_images_per_sec=None,
        epochs=(),
        hourly_usd=3.06,
        price_as_of=date(2025, 5, 31),
        price_source="AWS list price (issue baseline)",
        usd_per_eur=1.2,
        rate_date=date(2025, 6, 30),
    )
    base.update(kw)
    return RunFacts(**base)
