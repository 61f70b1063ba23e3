"""``predict``: training images/s for a setup, with a band and the basis it used.

One device's rate = 1 / step seconds per image (roofline.py): the network's counted work
per layer class (traffic.py) on the GPU's roofs (gpus.roofs: tensor peak, bandwidth, issue
rate) at the efficiencies fitted for the setup's software stack (fit.py) -- unless gpu-check
measured the setup on this very GPU (measured.py), which wins, labelled "measured". Then
the data pipeline may cap the rate (pipeline.py: "data-bound") and devices scale by the
communication model (multihost.py). The band is the backtest's error at the prediction's
level of evidence (bands.py). The ledger's history of your own runs is not here:
estimate.estimator prefers it over this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from finetune.estimate.perf import (
    bands,
    fit,
    flops,
    gpus,
    measured,
    multihost,
    observations,
    ondemand,
    pipeline,
    roofline,
    stacks,
    traffic,
)
from finetune.estimate.perf.setup import Setup as Setup  # re-exported: callers say perf.Setup

LEVEL = {
    0: "measured by gpu-check on this GPU",
    1: "the stack has rows on this GPU",
    2: "the stack has rows on other GPUs only",
    3: "no row of this stack: its nearest stacks'",
}


@dataclass(frozen=True)
class Prediction:
    """Images/s of all devices together, its band, and how it was reached."""

    images_per_sec: float
    low: float
    high: float
    per_device: float
    efficiency: float  # of the devices together (multihost)
    mfu: float  # achieved fraction of the tensor peak, one device
    bound: str  # "data", else the roof the step spends most on: compute, memory, issue, overhead
    level: int  # 0-3, see LEVEL
    basis: tuple[str, ...] = field(default=())
    uncalibrated: bool = False  # no row of the network's family was learned from
    measured: bool = False  # gpu-check's own row of this GPU (level 0)
    terms: tuple[tuple[str, float], ...] = ()  # the roofline's seconds per image per class
    stack: str = ""
    efficiencies: tuple[tuple[str, float], ...] = ()  # the stack's, as fitted
    taught_by: tuple[str, ...] = ()  # the rows the efficiencies were fitted to

    @property
    def data_bound(self) -> bool:
        return self.bound == "data"

    @property
    def wider_band(self) -> bool:
        return self.level >= 3 or self.uncalibrated


def predict(setup: Setup, exclude: frozenset[str] = frozenset()) -> Prediction | None:
    """Images/s for ``setup``, rows in ``exclude`` left out (the backtest); None when the
    network's counts, the GPU's roofs or every row is missing."""
    counted = _counted(setup)
    roofs = gpus.roofs(setup.gpu_model, setup.precision)
    if counted is None or roofs is None or setup.batch_per_device < 1:
        return None
    work = roofline.work(counted, roofs, setup.batch_per_device)
    stack = stacks.of_setup(setup)
    learned = fit.fitted(exclude).learned(
        stack, roofs.gpu, counted.network, counted.precision, setup.batch_per_device
    )
    if learned is None:
        return None
    parts = {k: v * learned.correction for k, v in roofline.terms(work, learned.efficiency).items()}
    rate = 1 / sum(parts.values())
    unseen = _family_unseen(counted.network, exclude)
    band = bands.band(learned.level, unseen)
    low, high = band.around(rate)
    level, loop = learned.level, setup.engine.loop if setup.framework is None else str(stack)
    lines = [
        f"{loop} prediction: {rate:.0f} img/s per device = 1 / ("
        + " + ".join(f"{v * 1e6:.0f} us {k}" for k, v in parts.items())
        + f") on {roofs.gpu} ({roofs.tensor_tflops:g} TFLOP/s {roofs.tensor_unit}, "
        f"{roofs.memory_gbps:g} GB/s, {roofs.issue_tops:g} T instructions/s)",
        counted.describe(),
        f"{learned.note}: {learned.efficiency.describe()}",
        band.describe(),
    ]
    seen = measured.predict(setup, exclude) if setup.framework is None else None
    if seen is not None:
        (rate, low, high, mine), level = seen, 0
        lines = [mine[0], *lines[1:3]]
    if unseen:
        lines.append(f"no row of the {_family(counted.network)} family was learned from: band "
                     f"widened by the leave-the-family-out backtest's errors")  # fmt: skip
    rates, bound = [rate, low, high], roofline.bound(parts)
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
    effs = [multihost.at_rate(r, counted.parameters, setup, exclude, setup.batch_per_device)
            for r in rates]  # fmt: skip
    jitter, fitted_to = multihost.fitted_jitter(exclude)
    link = multihost.link_for(setup.family, setup.gpu_model)
    lines.append(multihost.describe(effs[0], setup.gpus_per_host, setup.hosts, link, jitter,
                                    fitted_to))  # fmt: skip
    total = [r * setup.devices * e for r, e in zip(rates, effs, strict=True)]
    e = learned.efficiency
    return Prediction(
        images_per_sec=total[0], low=min(total), high=max(total), per_device=rates[0],
        efficiency=effs[0], mfu=rates[0] * counted.matmul_gflops / (roofs.tensor_tflops * 1e3),
        bound=bound, level=level, basis=tuple(lines), uncalibrated=unseen, measured=level == 0,
        terms=tuple(parts.items()), stack=str(stack),
        efficiencies=(("compute", e.compute), ("memory", e.memory),
                      ("instructions_per_element", 1 / e.issue), ("kernel_us", e.kernel_us)),
        taught_by=learned.taught_by,
    )  # fmt: skip


def _counted(setup: Setup) -> traffic.Traffic | None:
    """The bundled counts of the setup's network, else its engine's network counted on the
    meta device (a timm model: ondemand.py)."""
    found = traffic.lookup(setup.network, setup.image_size, setup.precision)
    if found is None:
        return ondemand.lookup(setup.engine, setup.network, setup.image_size, setup.precision)
    return found


def _family(network: str) -> str:
    return flops.family(network) or network


def _family_unseen(network: str, exclude: frozenset[str]) -> bool:
    """True when no observation left in is of ``network``'s family."""
    fam = _family(network)
    return not any(o.family == fam for o in observations.observations(exclude))


def scaled(setup: Setup, per_device: float) -> tuple[float, str] | None:
    """(efficiency, basis line) for ``setup``'s devices at ``per_device`` images/s each (a
    measured rate); None for a network without counts."""
    counted = _counted(setup)
    if counted is None or per_device <= 0 or setup.batch_per_device < 1:
        return None
    eff = multihost.at_rate(per_device, counted.parameters, setup, frozenset(),
                            setup.batch_per_device)  # fmt: skip
    jitter, fitted_to = multihost.fitted_jitter(frozenset())
    link = multihost.link_for(setup.family, setup.gpu_model)
    return eff, multihost.describe(eff, setup.gpus_per_host, setup.hosts, link, jitter,
                                   fitted_to)  # fmt: skip
