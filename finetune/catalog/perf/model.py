"""``predict``: training images/s for a setup, with a band and the basis it used.

Compute-bound rate per device = peak(GPU, precision) x MFU / training FLOPs per image. The
MFU (model FLOP utilisation: achieved / peak) is learned from calibration rows of the kind
class predicted -- ``plain`` (a plain training loop on real data: what finetune's own engine
is) or tuned (``record`` and ``reference``) -- at the same precision class, nearest first:

1. the same GPU and network; 2. the same GPU; 3. the same architecture (transfer between GPUs
of one generation by their peak ratio: the MFU carries over); 4. across generations, the
stated rule: the MFU of the nearest architecture(s) that have rows, with a band of +-40 %
(the basis says no row exists in this GPU's generation); 5. no plain-loop row at this
precision anywhere: the tuned rows' MFU (levels 1-4) x the plain share (``plain_share``:
plain / tuned MFU where a cell was measured both ways), band +-50 %.

The point is the median of that level's MFUs; the band spans their range widened by the
level's margin. For plain predictions, tuned rows of the GPU (else its architecture) bound the
MFU from above: a plain loop does not beat a tuned record. Then the data pipeline may cap the
rate (pipeline.py) and devices scale by the communication model (scaling.py).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from finetune.catalog.perf import calibration, flops, gpus, pipeline, scaling

MARGIN = {1: 0.15, 2: 0.20, 3: 0.25, 4: 0.40, 5: 0.50}  # +- band around the MFU range
# A plain loop's share of a tuned rate where no cell was measured both ways: an assumption.
DEFAULT_PLAIN_SHARE = 0.5
LEVEL = {
    1: "same GPU and network",
    2: "same GPU, other networks",
    3: "same architecture, other GPUs (by peak ratio)",
    4: "no calibration in this GPU's generation: nearest architecture's MFU, band widened",
}


@dataclass(frozen=True)
class Setup:
    """What a prediction is for."""

    network: str  # a recipe's model name ('resnet50', 'imagenet11k-resnet-152')
    gpu_model: str  # as instances.csv or gpu_peaks.csv name it
    precision: str  # fp32 | tf32 | fp16 | bf16 (resolve 'auto' with gpus.resolve_precision)
    batch_per_device: int
    image_size: int = 224
    gpus_per_host: int = 1
    hosts: int = 1
    kind: str = "plain"  # the kind class predicted: plain, or record/reference (tuned)
    family: str | None = None  # instance family, for the interconnect
    vcpus: int | None = None  # per host; None: no CPU cap known
    decoder: pipeline.Decoder | None = None  # None: nothing decoded per epoch on the CPU

    @property
    def devices(self) -> int:
        return self.gpus_per_host * self.hosts


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
    level: int  # 1-4, see LEVEL
    basis: tuple[str, ...] = field(default=())

    @property
    def data_bound(self) -> bool:
        return self.bound == "data"

    @property
    def wider_band(self) -> bool:
        return self.level == 4


def row_mfu(row: calibration.Row, exclude: frozenset[str] = frozenset()) -> float | None:
    """The MFU a calibration row implies (per device, after its scaling efficiency)."""
    count = flops.lookup(row.network, row.image_size)
    peak = gpus.peak_tflops(row.gpu_model, row.precision)
    if count is None or peak is None or row.images_per_sec <= 0:
        return None
    per_device = row.images_per_sec / row.devices
    if row.devices > 1 and row.batch_per_device > 0:
        eff = _efficiency(per_device, count, row.gpus_per_host, row.hosts, row, exclude)
        per_device /= eff
    return per_device * count.gflops * 1e9 / (peak[0] * 1e12)


def _efficiency(per_device, count, per_host, hosts, s, exclude) -> float:
    jitter, _ = scaling.fitted_jitter(exclude)
    link = scaling.link_for(getattr(s, "family", None), s.gpu_model)
    step = s.batch_per_device / per_device
    return scaling.efficiency(step, count.parameters, per_host, hosts, link, jitter)


def _same_class(row: calibration.Row, kind: str) -> bool:
    return row.tuned == (kind in calibration.TUNED)


def _candidates(setup: Setup, exclude: frozenset[str], tuned: bool):
    """[(row, mfu)] of the kind class and precision class asked, not excluded."""
    want = gpus.precision_class(setup.precision)
    out = []
    for row in calibration.rows():
        if row.id in exclude or row.tuned != tuned:
            continue
        if gpus.precision_class(row.precision) != want:
            continue
        mfu = row_mfu(row, exclude)
        if mfu is not None:
            out.append((row, mfu))
    return out


def _level_rows(setup: Setup, found) -> tuple[int, list]:
    """The nearest level with rows, and those rows."""
    peak, arch = gpus.peak(setup.gpu_model), gpus.architecture(setup.gpu_model)
    net = flops.network_key(setup.network)
    same_gpu = [(r, m) for r, m in found if gpus.peak(r.gpu_model) == peak]
    if same := [(r, m) for r, m in same_gpu if flops.network_key(r.network) == net]:
        return 1, same
    if same_gpu:
        return 2, same_gpu
    if same_arch := [(r, m) for r, m in found if gpus.architecture(r.gpu_model) == arch]:
        return 3, same_arch
    if not found:
        return 0, []
    nearest = min(gpus.generation_distance(arch, gpus.architecture(r.gpu_model)) for r, _ in found)
    near = [
        (r, m) for r, m in found
        if gpus.generation_distance(arch, gpus.architecture(r.gpu_model)) == nearest
    ]  # fmt: skip
    return 4, near


def _learn(setup: Setup, exclude: frozenset[str], tuned: bool):
    """(median MFU, low, high, level, rows) from one kind class; None without rows."""
    level, rows = _level_rows(setup, _candidates(setup, exclude, tuned))
    if not rows:
        return None
    mfus = [m for _, m in rows]
    margin = MARGIN[level]
    return statistics.median(mfus), min(mfus) * (1 - margin), max(mfus) * (1 + margin), level, rows


def plain_share(exclude: frozenset[str] = frozenset()) -> tuple[float, int]:
    """(median plain-loop MFU / tuned MFU over cells measured both ways, how many cells):
    what a plain loop keeps of a tuned benchmark on the same GPU, network and precision."""
    tuned = {}
    for row in calibration.rows():
        if row.tuned and row.id not in exclude and (m := row_mfu(row, exclude)) is not None:
            tuned.setdefault(_cell(row), []).append(m)
    ratios = [
        m / statistics.median(tuned[_cell(row)])
        for row in calibration.rows()
        if not row.tuned and row.id not in exclude and _cell(row) in tuned
        if (m := row_mfu(row, exclude)) is not None
    ]
    return (statistics.median(ratios), len(ratios)) if ratios else (DEFAULT_PLAIN_SHARE, 0)


def _cell(row: calibration.Row):
    peak = gpus.peak(row.gpu_model)
    net = flops.network_key(row.network)
    return peak.model if peak else row.gpu_model, net, gpus.precision_class(row.precision)


def learned_mfu(setup: Setup, exclude: frozenset[str] = frozenset()):
    """(mfu, low, high, level, basis lines) for ``setup``; None without any usable row."""
    tuned = setup.kind in calibration.TUNED
    got = _learn(setup, exclude, tuned)
    if got is None and not tuned:
        return _from_tuned(setup, exclude)
    if got is None:
        return None
    point, low, high, level, rows = got
    what = "tuned (record/reference)" if tuned else "plain-loop"
    basis = [
        f"MFU {point:.1%} (band {low:.1%}-{high:.1%}): median of {len(rows)} {what} "
        f"calibration row(s), {LEVEL[level]}: {_ids(rows)}"
    ]
    if not tuned:
        point, low, high = _tuned_bound(setup, exclude, (point, low, high), basis)
    return point, low, high, level, basis


def _from_tuned(setup: Setup, exclude: frozenset[str]):
    """Level 5: no plain-loop row at this precision class: tuned MFU x the plain share."""
    got = _learn(setup, exclude, True)
    if got is None:
        return None
    point, low, high, level, rows = got
    share, cells = plain_share(exclude)
    margin = MARGIN[5]
    point, low, high = point * share, low * share * (1 - margin), high * share * (1 + margin)
    how = f"median of {cells} cell(s) measured both ways" if cells else "assumed"
    basis = [
        f"MFU {point:.1%} (band {low:.1%}-{high:.1%}): no plain-loop row at "
        f"{gpus.precision_class(setup.precision)} precision, so tuned rows ({len(rows)}, "
        f"{LEVEL[level]}: {_ids(rows)}) x {share:.2f}, a plain loop's share of a tuned rate "
        f"({how}); band +-{margin:.0%}"
    ]
    return point, low, high, 5, basis


def _ids(rows) -> str:
    return ", ".join(r.id for r, _ in rows[:6]) + (", ..." if len(rows) > 6 else "")


def _tuned_bound(setup: Setup, exclude, mfus, basis: list[str]):
    """A plain loop does not beat a tuned record of the same network on the same GPU (or
    architecture): cap the MFU and its band there."""
    net = flops.network_key(setup.network)
    same_net = [
        (r, m) for r, m in _candidates(setup, exclude, True) if flops.network_key(r.network) == net
    ]
    level, bound = _level_rows(setup, same_net)
    if not bound or level > 3:
        return mfus
    row, top = max(bound, key=lambda rm: rm[1])
    if top < mfus[2]:
        basis.append(f"tuned rows bound the MFU at {top:.1%} ({row.cite()})")
    return tuple(min(m, top) for m in mfus)


def predict(setup: Setup, exclude: frozenset[str] = frozenset()) -> Prediction | None:
    """Images/s for ``setup``, calibration rows in ``exclude`` left out (the backtest); None
    when the network's FLOPs, the GPU's peak or every calibration row is missing."""
    count = flops.lookup(setup.network, setup.image_size)
    peak = gpus.peak_tflops(setup.gpu_model, setup.precision)
    learned = learned_mfu(setup, exclude)
    if count is None or peak is None or learned is None or setup.batch_per_device < 1:
        return None
    mfu, low, high, level, basis = learned
    per_tflop = 1e12 / (count.gflops * 1e9)  # images/s per TFLOP/s achieved
    rates = [m * peak[0] * per_tflop for m in (mfu, low, high)]
    kind = "tuned-record" if setup.kind in calibration.TUNED else "plain PyTorch-loop"
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
    effs = [_efficiency(r, count, setup.gpus_per_host, setup.hosts, setup, exclude) for r in rates]
    jitter, fitted = scaling.fitted_jitter(exclude)
    link = scaling.link_for(setup.family, setup.gpu_model)
    lines.append(scaling.describe(effs[0], setup.gpus_per_host, setup.hosts, link, jitter, fitted))
    total = [r * setup.devices * e for r, e in zip(rates, effs, strict=True)]
    return Prediction(
        images_per_sec=total[0],
        low=min(total),
        high=max(total),
        per_device=rates[0],
        efficiency=effs[0],
        mfu=mfu,
        bound=bound,
        level=level,
        basis=tuple(lines),
    )


def scaled(setup: Setup, per_device: float) -> tuple[float, str] | None:
    """(efficiency, basis line) for ``setup``'s devices at ``per_device`` images/s each (a
    measured rate); None for a network without a FLOP/parameter count."""
    count = flops.lookup(setup.network, setup.image_size)
    if count is None or per_device <= 0 or setup.batch_per_device < 1:
        return None
    eff = _efficiency(per_device, count, setup.gpus_per_host, setup.hosts, setup, frozenset())
    jitter, fitted = scaling.fitted_jitter(frozenset())
    link = scaling.link_for(setup.family, setup.gpu_model)
    return eff, scaling.describe(eff, setup.gpus_per_host, setup.hosts, link, jitter, fitted)
