"""The pre-launch estimate: time and euros for a planned cloud run, with every source named.

It joins the catalog (instance, price, EUR rate, spot estimate, throughput) into a planned
``money.Charge`` billed by ``money.euros`` (the function finished runs are costed with) and
returns a plain dict that ``Plan.with_estimate`` stores; its ``summary`` lines
are what `launch --dry-run` shows. Estimates learn: callers pass the ledger's measured runs as
``history`` (runs.facts.measured_history) and a measured run of the same network and GPU model
replaces the reference table -- the summary says which runs it came from.
"""

from __future__ import annotations

from collections.abc import Iterable

from finetune.catalog import fx, instances, prices, spot, throughput
from finetune.report import cost, money
from finetune.report.model import RunFacts

# Instance start, image pull and data download before the first batch. An assumption, not a
# measurement: measured runs in the ledger show the real figure for a given setup.
DEFAULT_OVERHEAD_SECONDS = 300.0


def measurements(runs: Iterable[RunFacts]) -> list[throughput.Measurement]:
    """Finished runs as throughput history for ``estimate_run`` (runs without metrics drop out)."""
    return [
        throughput.Measurement(r.model, r.gpu_model, r.gpus, r.images_per_sec, r.run_id)
        for r in runs
        if r.images_per_sec
    ]


def estimate_run(
    *,
    model: str,
    instance_type: str,
    region: str,
    images_per_epoch: int,
    epochs: int,
    instance_count: int = 1,
    backend: str = "ec2",
    use_spot: bool = False,
    history: Iterable[throughput.Measurement] = (),
    overhead_seconds: float = DEFAULT_OVERHEAD_SECONDS,
) -> dict:
    """Estimated seconds and EUR for ``epochs`` over ``images_per_epoch`` images.

    Raises the catalog's UsageError/DataError for an unknown instance or a region without a
    price. When no throughput figure exists, time and euros are None and the summary says why.
    """
    inst = instances.get(instance_type)
    price = prices.price(inst.name, region, backend)  # SageMaker: EC2 x markup until a refresh
    rate = fx.eur_rate()
    quote = spot.estimated(price) if use_spot else price
    charge = money.Charge(
        rule=backend,  # the price book's service: ec2 | sagemaker, whose billing rule applies
        instance_type=price.display_name,
        instances=instance_count,
        seconds=0,
        usd_per_hour=quote.usd_per_hour,
        price_source=quote.source,
        price_as_of=quote.as_of_iso,
        market="spot" if use_spot else "on-demand",
    )
    gpus = inst.gpu_count * instance_count
    out = {
        "instance_type": price.display_name,
        "instance_count": instance_count,
        "gpus": gpus,
        "hourly_usd": quote.usd_per_hour,
        "eur_per_hour": money.eur_per_hour(charge, rate),
        "price_as_of": price.as_of_iso,
        "price_age": price.age,
        "price_source": price.source,
        "price_is_estimate": price.estimate,
        "charge": charge.to_dict(),
        "spot_estimate": use_spot,
        "usd_per_eur": rate.usd_per_eur,
        "rate_date": rate.on.isoformat(),
        "rate_source": rate.source,
        "seconds": None,
        "eur": None,
        "images_per_sec": None,
        "throughput_source": None,
        "throughput_measured": False,
    }
    head = f"{out['eur_per_hour']:.2f} EUR/h for {gpus}x {inst.gpu_model}"
    lines = [head + _spot(quote if use_spot else None)]
    tp = throughput.estimate(model, inst.gpu_model, gpus, history)
    if tp is None:
        lines.append(
            f"no throughput figure for {model} on {inst.gpu_model}: time and EUR unknown "
            "until a run is measured"
        )
    else:
        lines += _time_and_money(out, tp, images_per_epoch, epochs, charge, rate, overhead_seconds)
    kind = "estimated price" if price.estimate else "price"
    lines.append(f"{kind}: {price.source} ({price.age}); EUR: {rate.describe()}")
    warning = instances.retirement_warning(inst)
    out["summary"] = [*lines, warning] if warning else lines
    return out


def _time_and_money(out: dict, tp, images_per_epoch, epochs, charge, rate, overhead) -> list[str]:
    """Fill seconds and euros into ``out`` from throughput ``tp``; return the summary lines."""
    est = cost.estimate(
        images_per_epoch=images_per_epoch,
        epochs=epochs,
        images_per_sec=tp.images_per_sec,
        throughput_source=tp.source,
        charge=charge,
        rate=rate,
        overhead_seconds=overhead,
    )
    out.update(
        seconds=est.billable_seconds,
        eur=est.eur,
        images_per_sec=tp.images_per_sec,
        throughput_source=tp.source,
        throughput_measured=tp.measured,
    )
    learned = " (learned from your ledger, not the reference table)" if tp.measured else ""
    return [
        f"~{est.billable_seconds / 60:.0f} min ({epochs} epochs at {tp.images_per_sec:.0f} img/s "
        f"+ {overhead:.0f} s start-up): ~{est.eur:.2f} EUR",
        f"throughput: {tp.source}{learned}",
    ]


def _spot(quote) -> str:
    return f" (spot, estimated: {quote.source})" if quote is not None else ""
