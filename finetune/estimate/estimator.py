"""The pre-launch estimate: time and euros for a planned cloud run, with every source named.

ONE estimator for launch, --dry-run, sweep, plan and the --max-eur guards. It joins the
catalog -- instance, price, EUR rate, spot estimate, and throughput: the ledger's measured
runs of the same cell when there are any (runs.facts.measured_history, passed in as
``history``), else the performance model (estimate/perf: MFU from sourced calibration rows,
scaling, the CPU decode cap) -- into a planned ``money.Charge`` billed by ``money.euros``
(the function finished runs are costed with) and returns a typed ``Estimate``
(estimate/planned.py) with a band (low/high) and its basis; ``summary`` is what
`launch --dry-run` shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from finetune.catalog import fx, instances, prices, spot
from finetune.engines import registry
from finetune.estimate import cost, money, run_history
from finetune.estimate.perf import gpus as perf_gpus
from finetune.estimate.perf import pipeline
from finetune.estimate.perf import throughput as perf
from finetune.estimate.planned import Estimate

# Instance start, image pull and data download before the first batch. An assumption, not a
# measurement: measured runs in the ledger show the real figure for a given setup.
DEFAULT_OVERHEAD_SECONDS = 300.0


@dataclass(frozen=True)
class Workload:
    """What is trained: the recipe's network, engine, precision, batch and image size."""

    model: str
    engine: str = "torch"
    precision: str = "auto"  # a recipe's train.precision; MXNet trains in fp32
    batch_per_device: int = 32
    image_size: int = 224
    compile: bool = False  # a recipe's train.compile (torch)


@dataclass(frozen=True)
class Throughput:
    """Images/s of all devices with its band, and how it was reached."""

    images_per_sec: float
    low: float
    high: float
    basis: tuple[str, ...]
    measured: bool
    efficiency: float | None = None
    data_bound: bool = False
    wider_band: bool = False
    checked: bool = False  # measured by gpu-check (finetune.estimate.perf.measured)


Quote = prices.Price | spot.SpotPrice  # the price a charge is planned at (spot: its estimate)


class _Run(TypedDict):
    """What is run and billed: cost.estimate's arguments besides the throughput."""

    images_per_epoch: int
    epochs: int
    charge: money.Charge
    rate: fx.Rate


def precision_for(work: Workload, gpu_model: str) -> str:
    """The precision the engine trains at on this GPU (MXNet: fp32; torch: as it resolves)."""
    fixed = registry.get(work.engine).fixed_precision
    if fixed:
        return fixed
    return perf_gpus.resolve_precision(work.precision, gpu_model)


def setup_for(work: Workload, inst: instances.InstanceType, hosts: int, images: int) -> perf.Setup:
    """The performance model's Setup for ``work`` on ``hosts`` x ``inst``."""
    decoder = pipeline.per_epoch_decoder(work.engine, images, work.image_size, inst.gpu_memory_gib)
    return perf.Setup(
        network=work.model,
        gpu_model=inst.gpu_model,
        precision=precision_for(work, inst.gpu_model),
        batch_per_device=work.batch_per_device,
        image_size=work.image_size,
        gpus_per_host=inst.gpu_count,
        hosts=hosts,
        family=inst.family,
        vcpus=inst.vcpus,
        decoder=decoder,
        engine=work.engine,
        compile=work.compile,
    )


def throughput_for(
    setup: perf.Setup, engine: str, history: Iterable[run_history.Measurement] = ()
) -> Throughput | None:
    """Measured history of this cell if any (it wins), else the model; None: neither."""
    found = run_history.from_history(
        setup.network, setup.gpu_model, setup.devices, history, engine=engine,
        batch_per_device=setup.batch_per_device, image_size=setup.image_size,
    )  # fmt: skip
    if found is not None and found.exact:
        return Throughput(found.images_per_sec, found.low, found.high, (found.describe(),), True)
    if found is not None:
        return _scaled_history(setup, found)
    p = perf.predict(setup)
    if p is None:
        return None
    return Throughput(  # (measured: gpu-check's rows of this setup, labelled so)
        p.images_per_sec,
        p.low,
        p.high,
        p.basis,
        p.measured,
        p.efficiency,
        p.data_bound,
        p.wider_band,
        p.measured,
    )


def _scaled_history(setup: perf.Setup, found: run_history.Measured) -> Throughput:
    """Runs measured on fewer devices: their per-device rate, scaled by the model."""
    at_runs = replace(setup, gpus_per_host=found.devices, hosts=1)
    before = perf.scaled(at_runs, found.images_per_sec)
    per_device = found.images_per_sec / (before[0] if before else 1.0)
    after = perf.scaled(setup, per_device)
    eff, line = after if after else (1.0, "scaling unknown: counted at 100 %")
    k = setup.devices * eff / (before[0] if before else 1.0)
    basis = (f"{found.describe()} on {found.devices} device(s), scaled to {setup.devices}", line)
    return Throughput(found.images_per_sec * k, found.low * k, found.high * k, basis, True, eff)


def estimate_run(
    *,
    model: str,
    instance_type: str,
    region: str,
    images_per_epoch: int,
    epochs: int,
    hosts: int = 1,
    backend: str = "ec2",
    use_spot: bool = False,
    history: Iterable[run_history.Measurement] = (),
    overhead_seconds: float = DEFAULT_OVERHEAD_SECONDS,
    work: Workload | None = None,
    other_images: int = 0,
    checkpoint_interval_s: float | None = None,
    rate: fx.Rate | None = None,
    spot_quote: spot.SpotPrice | None = None,
) -> Estimate:
    """Estimated seconds and EUR for ``epochs`` over ``images_per_epoch`` images of ``work``
    (default: ``model`` with the torch engine's defaults) on ``hosts`` instances.
    ``other_images`` (validation, test) count towards what the engine keeps decoded.
    Spot with ``checkpoint_interval_s``: the time adds the expected interruptions' lost work
    (catalog.spot.interruption_overhead, its assumption named in the summary). ``rate``: the
    EUR rate to use (default today's; a plan over many candidates reads it once).
    ``spot_quote``: a current spot price (EC2's, read by the backend) instead of the estimate.

    Raises the catalog's UsageError/DataError for an unknown instance or a region without a
    price. When no throughput can be had, time and euros are None and the summary says why.
    """
    work = work or Workload(model)
    inst = instances.get(instance_type)
    price = prices.price(inst.name, region, backend)  # SageMaker: EC2 x markup until a refresh
    rate = rate or fx.eur_rate()
    quote = (spot_quote or spot.estimated(price)) if use_spot else price
    charge = _planned_charge(backend, price, quote, hosts, use_spot)
    fields = _price_fields(inst, price, quote, charge, rate, hosts, use_spot, work)
    head = f"{fields['eur_per_hour']:.2f} EUR/h for {fields['gpus']}x {inst.gpu_model}"
    lines = [head + _spot(quote if use_spot else None)]
    setup = setup_for(work, inst, hosts, images_per_epoch + other_images)
    tp = throughput_for(setup, work.engine, history)
    if tp is None:
        lines.append(
            f"no throughput figure for {work.model} on {inst.gpu_model}: time and EUR unknown "
            "until a run is measured"
        )
    else:
        run = _Run(images_per_epoch=images_per_epoch, epochs=epochs, charge=charge, rate=rate)
        every = checkpoint_interval_s if use_spot else None
        lines += _run_lines(fields, tp, run, overhead_seconds, every, hosts)
    kind = "estimated price" if price.estimate else "price"
    lines.append(f"{kind}: {price.source} ({price.age}); EUR: {rate.describe()}")
    warning = instances.retirement_warning(inst)
    return Estimate(
        **fields,
        summary=(*lines, warning) if warning else tuple(lines),
        warnings=(warning,) if warning else (),
    )


def _planned_charge(
    backend: str, price: prices.Price, quote: Quote, instances_: int, use_spot: bool
) -> money.Charge:
    """The charge a run would make, billed by ``money.euros`` like a finished one's."""
    return money.Charge(
        rule=backend,  # the price book's service: ec2 | sagemaker, whose billing rule applies
        instance_type=price.display_name,
        instances=instances_,
        seconds=0,
        usd_per_hour=quote.usd_per_hour,
        price_source=quote.source,
        price_as_of=quote.as_of_iso,
        market="spot" if use_spot else "on-demand",
    )


def _price_fields(
    inst: instances.InstanceType,
    price: prices.Price,
    quote: Quote,
    charge: money.Charge,
    rate: fx.Rate,
    count: int,
    use_spot: bool,
    work: Workload,
) -> dict[str, Any]:
    """The Estimate's price, rate and device fields (time and euros come later)."""
    return dict(
        instance_type=price.display_name, instance_count=count, gpus=inst.gpu_count * count,
        hourly_usd=quote.usd_per_hour, eur_per_hour=money.eur_per_hour(charge, rate),
        price_as_of=price.as_of_iso, price_age=price.age, price_source=price.source,
        price_is_estimate=price.estimate, charge=charge.to_dict(),
        spot_estimate=bool(use_spot and quote.estimate),
        usd_per_eur=rate.usd_per_eur, rate_date=rate.on.isoformat(), rate_source=rate.source,
        precision=precision_for(work, inst.gpu_model),
    )  # fmt: skip


def _run_lines(
    fields: dict[str, Any],
    tp: Throughput,
    run: _Run,
    overhead: float,
    every: float | None,
    count: int,
) -> list[str]:
    """Time and euros into ``fields``; with a spot checkpoint interval ``every``, the expected
    interruptions' lost work added and named (catalog.spot.interruption_overhead)."""
    lost = None
    if every:
        work_s = run["images_per_epoch"] * run["epochs"] / tp.images_per_sec + overhead
        lost = spot.interruption_overhead(work_s, count, every)
    lines = _time_and_money(fields, tp, run, overhead, lost.seconds if lost else 0)
    if lost is not None:
        fields["interruption_seconds"] = lost.seconds
        lines.append(lost.describe())
    return lines


def _time_and_money(
    fields: dict[str, Any], tp: Throughput, run: _Run, overhead: float, lost: float = 0.0
) -> list[str]:
    """Fill seconds and euros (point and band) into ``fields``; return the summary lines.
    ``lost``: expected spot interruptions' lost work, added to the time."""
    est = {
        name: cost.estimate(
            **run,
            images_per_sec=rate,
            throughput_source=tp.basis[0],
            overhead_seconds=overhead + lost,
        )
        for name, rate in (("point", tp.images_per_sec), ("fast", tp.high), ("slow", tp.low))
    }
    point, fast, slow = est["point"], est["fast"], est["slow"]
    fields.update(
        seconds=point.billable_seconds, eur=point.eur, images_per_sec=tp.images_per_sec,
        throughput_source=tp.basis[0], throughput_measured=tp.measured,
        images_per_sec_low=tp.low, images_per_sec_high=tp.high,
        seconds_low=fast.billable_seconds, seconds_high=slow.billable_seconds,
        eur_low=fast.eur, eur_high=slow.eur, efficiency=tp.efficiency,
        data_bound=tp.data_bound, wider_band=tp.wider_band, basis=tp.basis,
    )  # fmt: skip
    learned = " (learned from your ledger, not the model)" if tp.measured else ""
    if tp.checked:
        learned = " (measured by gpu-check on this GPU kind, not the model)"
    bound = "; data-bound: the CPUs' decode rate sets the pace" if tp.data_bound else ""
    wide = "; wider band (the throughput basis says why)" if tp.wider_band else ""
    spot_lost = f" + {lost:.0f} s spot interruptions" if lost else ""
    return [
        f"~{point.billable_seconds / 60:.0f} min ({run['epochs']} epochs at "
        f"{tp.images_per_sec:.0f} img/s, band {tp.low:.0f}-{tp.high:.0f}, + {overhead:.0f} s "
        f"start-up{spot_lost}): ~{point.eur:.2f} EUR (band {fast.eur:.2f}-{slow.eur:.2f})"
        f"{bound}{wide}",
        *(f"throughput: {line}{learned}" if i == 0 else f"  {line}"
          for i, line in enumerate(tp.basis)),
    ]  # fmt: skip


def _spot(quote: Quote | None) -> str:
    if quote is None:
        return ""
    return f" (spot, {'estimated: ' if quote.estimate else ''}{quote.source})"
