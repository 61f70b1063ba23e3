"""``predict``: training images/s for a setup, with a band and the basis it used.

Compute-bound rate per device = peak(GPU, precision) x MFU / training FLOPs per image, the
MFU learned from sourced calibration rows of the kind class predicted (mfu.py: a plain
PyTorch loop, as finetune's own engine is, unless a tuned kind is asked) -- unless gpu-check
measured the setup (measured.py: the GPU or one of its architecture, the network, precision,
batch, layout and compile), which wins, labelled "measured". Then the data pipeline may cap
the rate (pipeline.py: "data-bound") and devices scale by the communication model
(multihost.py). The ledger's history of your own runs is not here: estimate.estimator prefers it
over this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from finetune.estimate.perf import (
    calibration,
    families,
    flops,
    gpus,
    measured,
    mfu,
    mfu_learned,
    multihost,
    pipeline,
)
from finetune.estimate.perf.setup import Setup as Setup  # re-exported: callers say perf.Setup


def _plain(engine: str) -> str:
    """What finetune's engines are: plain training loops, not tuned records (no DALI, no
    fused kernels beyond the framework's own), so the model predicts the plain kind for them
    (each engine's descriptor names its loop)."""
    from finetune.engines import registry

    described = registry.get(engine) if engine in registry.ENGINES else None
    return described.loop if described else "plain-loop"


@dataclass(frozen=True)
class Prediction:
    """Images/s of all devices together, its band, and how it was reached."""

    images_per_sec: float
    low: float
    high: float
    per_device: float
    efficiency: float
    mfu: float
    bound: str  # "compute" or "data"
    level: int  # 1-5, see mfu.LEVEL
    basis: tuple[str, ...] = field(default=())
    uncalibrated: bool = False  # no calibration row of the network's family anywhere
    measured: bool = False  # from gpu-check's measured rows (level 0), not learned MFU

    @property
    def data_bound(self) -> bool:
        return self.bound == "data"

    @property
    def wider_band(self) -> bool:
        return self.level >= 4 or self.uncalibrated


def predict(setup: Setup, exclude: frozenset[str] = frozenset()) -> Prediction | None:
    """Images/s for ``setup``, calibration rows in ``exclude`` left out (the backtest); None
    when the network's FLOPs, the GPU's peak or every calibration row is missing."""
    count = flops.lookup(setup.network, setup.image_size)
    peak = gpus.peak_tflops(setup.gpu_model, setup.precision)
    seen = measured.predict(setup, exclude) if setup.kind == "plain" else None
    learned = None if seen else mfu_learned.learned(setup, exclude)
    if count is None or peak is None or not (seen or learned) or setup.batch_per_device < 1:
        return None
    per_tflop = 1e12 / (count.gflops * 1e9)  # images/s per TFLOP/s achieved
    uncalibrated = False
    if seen:
        rates, level = list(seen[:3]), 0
        point = rates[0] / (peak[0] * per_tflop)
        lines = [f"{_plain(setup.engine)} {seen[3][0]}"]
    elif learned is None:  # ruled out above (neither seen nor learned); narrows the type
        return None
    else:
        point, low, high, level, basis = learned
        uncalibrated = families.uncalibrated_family(setup.network)
        if uncalibrated:
            low, high = low * (1 - families.FAMILY_MARGIN), high * (1 + families.FAMILY_MARGIN)
            basis = (*basis, families.family_note(setup.network))
        rates = [m * peak[0] * per_tflop for m in (point, low, high)]
        kind = "tuned-record" if setup.kind in calibration.TUNED else _plain(setup.engine)
        lines = [
            f"{kind} prediction: {peak[0]:g} TFLOP/s ({setup.gpu_model} {peak[1]} peak) x MFU / "
            f"{count.describe()}",
            *basis,
        ]
    bound = "compute"
    if setup.decoder is not None and setup.vcpus:
        cap = pipeline.cap(setup.decoder, setup.vcpus, setup.gpus_per_host) / setup.gpus_per_host
        if cap < rates[0]:
            bound = "data"
        lines.append(
            f"{'data-bound: ' if bound == 'data' else ''}CPU decode cap {cap:.0f} img/s per "
            f"device ({setup.decoder.per_core:g} img/s per core x {setup.vcpus} vCPUs less one "
            f"per GPU, {setup.decoder.source})"
        )
        rates = [min(r, cap) for r in rates]
    effs = [mfu.efficiency(r, count, setup, exclude, setup.batch_per_device) for r in rates]
    jitter, fitted = multihost.fitted_jitter(exclude)
    link = multihost.link_for(setup.family, setup.gpu_model)
    lines.append(
        multihost.describe(effs[0], setup.gpus_per_host, setup.hosts, link, jitter, fitted)
    )
    total = [r * setup.devices * e for r, e in zip(rates, effs, strict=True)]
    return Prediction(
        images_per_sec=total[0],
        low=min(total),
        high=max(total),
        per_device=rates[0],
        efficiency=effs[0],
        mfu=point,
        bound=bound,
        level=level,
        basis=tuple(lines),
        uncalibrated=uncalibrated,
        measured=level == 0,
    )


def scaled(setup: Setup, per_device: float) -> tuple[float, str] | None:
    """(efficiency, basis line) for ``setup``'s devices at ``per_device`` images/s each (a
    measured rate); None for a network without a FLOP/parameter count."""
    count = flops.lookup(setup.network, setup.image_size)
    if count is None or per_device <= 0 or setup.batch_per_device < 1:
        return None
    eff = mfu.efficiency(per_device, count, setup, frozenset(), setup.batch_per_device)
    jitter, fitted = multihost.fitted_jitter(frozenset())
    link = multihost.link_for(setup.family, setup.gpu_model)
    return eff, multihost.describe(eff, setup.gpus_per_host, setup.hosts, link, jitter, fitted)
