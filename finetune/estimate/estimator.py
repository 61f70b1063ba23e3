"""The pre-launch estimate: time and euros for a planned cloud run, with every source named.

ONE estimator for launch, --dry-run, sweep, plan and the --max-eur guards, as a pipeline of
four typed stages, each entered once: the setup resolved (resolve.py), its throughput
(throughput.py: the ledger's measured runs first, then the performance model), the run's
duration (duration.py) and its bill (bill.py: money.euros, as finished runs are costed). The
result is a typed ``Estimate`` (planned.py) with its bands and basis; ``summary`` is what
`launch --dry-run` shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from finetune.catalog import fx, instances, spot
from finetune.estimate.bill import Bill, Quote, bill
from finetune.estimate.duration import Duration, duration
from finetune.estimate.planned import Estimate
from finetune.estimate.request import EstimateRequest
from finetune.estimate.resolve import Resolved, resolve
from finetune.estimate.run_history import Measurement
from finetune.estimate.throughput import Throughput, throughput


def estimate(
    request: EstimateRequest,
    history: Iterable[Measurement] = (),
    rate: fx.Rate | None = None,
    spot_quote: spot.SpotPrice | None = None,
) -> Estimate:
    """Estimated seconds and EUR for ``request``. ``history``: measured runs, read from the
    ledger by the caller; ``rate``: the EUR rate (default today's: a plan over many
    candidates reads it once); ``spot_quote``: a current spot price instead of the estimate.

    Raises the catalog's UsageError/DataError for an unknown instance or a region without a
    price. When no throughput can be had, time and euros are None and the summary says why.
    """
    resolved = resolve(request)
    tp = throughput(resolved, history)
    run = duration(request, tp) if tp is not None else None
    billed = bill(resolved, run, rate, spot_quote)
    return _assemble(resolved, tp, run, billed)


def _assemble(resolved: Resolved, tp: Throughput | None, run: Duration | None, b: Bill) -> Estimate:
    request, inst = resolved.request, resolved.instance
    gpus = inst.gpu_count * request.hosts
    head = f"{b.eur_per_hour:.2f} EUR/h for {gpus}x {inst.gpu_model}" + _spot(b.quote, request.spot)
    lines = [head]
    fields: dict[str, Any] = {}
    if tp is None or run is None:
        lines.append(
            f"no throughput figure for {request.work.model} on {inst.gpu_model}: time and EUR "
            "unknown until a run is measured"
        )
    else:
        fields = _time_and_money(tp, run, b)
        lines += _run_lines(request.epochs, tp, run, b)
    kind = "estimated price" if b.price.estimate else "price"
    lines.append(f"{kind}: {b.price.source} ({b.price.age}); EUR: {b.rate.describe()}")
    warning = instances.retirement_warning(inst)
    return Estimate(
        instance_type=b.price.display_name, instance_count=request.hosts, gpus=gpus,
        hourly_usd=b.quote.usd_per_hour, eur_per_hour=b.eur_per_hour,
        price_as_of=b.price.as_of_iso, price_age=b.price.age, price_source=b.price.source,
        price_is_estimate=b.price.estimate, charge=b.charge.to_dict(),
        spot_estimate=bool(request.spot and b.quote.estimate),
        usd_per_eur=b.rate.usd_per_eur, rate_date=b.rate.on.isoformat(),
        rate_source=b.rate.source, precision=resolved.precision, **fields,
        summary=(*lines, warning) if warning else tuple(lines),
        warnings=(warning,) if warning else (),
    )  # fmt: skip


def _time_and_money(tp: Throughput, run: Duration, b: Bill) -> dict[str, Any]:
    """The Estimate's time and euros (point and band) and how the throughput was reached."""
    assert b.point and b.cheapest and b.dearest  # billed whenever a duration exists
    p = tp.prediction
    return dict(
        seconds=b.point.billed_seconds, eur=b.point.eur, images_per_sec=tp.images_per_sec,
        throughput_source=tp.basis[0], throughput_measured=tp.measured,
        images_per_sec_low=tp.low, images_per_sec_high=tp.high,
        seconds_low=b.cheapest.billed_seconds, seconds_high=b.dearest.billed_seconds,
        eur_low=b.cheapest.eur, eur_high=b.dearest.eur, efficiency=tp.efficiency,
        data_bound=tp.data_bound, wider_band=tp.wider_band, basis=tp.basis,
        interruption_seconds=run.interruptions.seconds if run.interruptions else None,
        bound=p.bound if p else None, stack=p.stack if p else None,
        terms=p.terms if p else (), efficiencies=p.efficiencies if p else (),
        taught_by=p.taught_by if p else (),
    )  # fmt: skip


def _run_lines(epochs: int, tp: Throughput, run: Duration, b: Bill) -> list[str]:
    assert b.point and b.cheapest and b.dearest
    learned = " (learned from your ledger, not the model)" if tp.measured else ""
    if tp.checked:
        learned = " (measured by gpu-check on this GPU kind, not the model)"
    bound = "; data-bound: the CPUs' decode rate sets the pace" if tp.data_bound else ""
    wide = "; wider band (the throughput basis says why)" if tp.wider_band else ""
    lost = run.interruptions
    spot_lost = f" + {lost.seconds:.0f} s spot interruptions" if lost else ""
    lines = [
        f"~{b.point.billed_seconds / 60:.0f} min ({epochs} epochs at "
        f"{tp.images_per_sec:.0f} img/s, band {tp.low:.0f}-{tp.high:.0f}, + {run.overhead:.0f} s "
        f"start-up{spot_lost}): ~{b.point.eur:.2f} EUR (band {b.cheapest.eur:.2f}-"
        f"{b.dearest.eur:.2f}){bound}{wide}",
        *(f"throughput: {line}{learned}" if i == 0 else f"  {line}"
          for i, line in enumerate(tp.basis)),
    ]  # fmt: skip
    return [*lines, lost.describe()] if lost else lines


def _spot(quote: Quote, on_spot: bool) -> str:
    if not on_spot:
        return ""
    return f" (spot, {'estimated: ' if quote.estimate else ''}{quote.source})"
