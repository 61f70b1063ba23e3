"""Stage 2 of an estimate: images/s for the resolved setup -- the ledger's measured runs of the
same cell first (they win), then the performance model -- with a band and its basis."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from finetune.estimate import run_history
from finetune.estimate.perf import throughput as perf
from finetune.estimate.resolve import Resolved


@dataclass(frozen=True)
class Throughput:
    """Images/s of all devices with its band, and how it was reached."""

    images_per_sec: float
    low: float
    high: float
    basis: tuple[str, ...]
    measured: bool  # from the ledger (or gpu-check), not the model
    efficiency: float | None = None
    data_bound: bool = False
    wider_band: bool = False
    checked: bool = False  # measured by gpu-check (finetune.estimate.perf.measured)
    prediction: perf.Prediction | None = None  # the model's, where it was used (--explain)


def throughput(
    resolved: Resolved, history: Iterable[run_history.Measurement] = ()
) -> Throughput | None:
    """Measured history of this cell if any (it wins), else the model; None: neither."""
    setup, work = resolved.setup, resolved.work
    found = run_history.from_history(
        setup.network, setup.gpu_model, setup.devices, history, engine=work.engine.name,
        batch_per_device=setup.batch_per_device, image_size=setup.image_size,
    )  # fmt: skip
    if found is not None and found.exact:
        return Throughput(found.images_per_sec, found.low, found.high, (found.describe(),), True)
    if found is not None:
        return _scaled_history(setup, found)
    p = perf.predict(setup)
    if p is None:
        return None
    return Throughput(
        p.images_per_sec, p.low, p.high, p.basis, p.measured, p.efficiency, p.data_bound,
        p.wider_band, p.measured, p,
    )  # fmt: skip


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
