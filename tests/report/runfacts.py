"""Test data for reports: RunFacts with every field defaulted, and epoch metrics."""

from __future__ import annotations

from datetime import date, datetime

from finetune.catalog.fx import Rate
from finetune.contracts.metrics import EpochMetrics
from finetune.estimate import money
from finetune.report.runfacts import RunFacts


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
    """A finished run; keyword arguments override the defaults (1 h of p3.2xlarge, rate 1.2).

    ``billable_seconds``, ``hourly_usd``, ``usd_per_eur``, ``price_source``, ``price_as_of``
    and ``rate_date`` become the run's one charge and its rate, billed by estimate.money.
    """
    price = dict(
        billable_seconds=3600.0,
        hourly_usd=3.06,
        price_as_of=date(2025, 5, 31),
        price_source="AWS list price (issue baseline)",
        usd_per_eur=1.2,
        rate_date=date(2025, 6, 30),
    )
    price.update({k: kw.pop(k) for k in list(kw) if k in price})
    base = dict(
        run_id="run",
        recipe="caltech256-resnet152",
        dataset="caltech256",
        model="imagenet11k-resnet-152",
        backend="ec2",
        instance_type="p3.2xlarge",
        hosts=1,
        devices_per_host=1,
        spot=False,
        region="us-east-1",
        started_at=datetime(2026, 3, 1, 12, 0),
        wall_seconds=3600.0,
        steady_images_per_sec=None,
        epochs=(),
    )
    base.update(kw)
    charge = money.Charge(
        rule=base["backend"],
        instance_type=base["instance_type"],
        instances=base["hosts"],
        seconds=price["billable_seconds"],
        usd_per_hour=price["hourly_usd"],
        price_source=price["price_source"],
        price_as_of=price["price_as_of"].isoformat(),
    )
    rate = Rate(
        price["usd_per_eur"], price["rate_date"], "ECB euro foreign exchange reference rate"
    )
    return RunFacts(**base, money=money.euros([charge], rate))


def pin_eur_rate(on: date, usd_per_eur: float, source: str = "ECB (test)") -> None:
    """Make ``usd_per_eur`` the EUR rate of the day ``on`` (other days keep the bundled ECB
    history), through the rate cache that `finetune prices refresh` writes."""
    from finetune.catalog import fx
    from finetune.catalog.usercache import cache_dir

    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / fx.CACHE_FILE).write_text(fx.to_csv({on: (usd_per_eur, source)}))
