"""The achieved fraction of a GPU's peak (MFU) for a setup, learned from calibration rows.

Rows count only in the kind class predicted -- ``plain`` (a plain training loop: what
finetune's own engine is) or tuned (``record``, ``reference``) -- and the precision class
(fp32/tf32 vs fp16/bf16). Nearest level first:

1. the same GPU and network; 2. the same GPU; 3. the same architecture, other GPUs;
4. other generations (the basis says no row of this kind exists in the GPU's generation;
   band +-40 %);
5. no row of this kind at this precision anywhere: tuned MFU x the plain share (plain / tuned
   MFU where a cell was measured both ways), band +-50 %.

Moving a row's MFU from its GPU to the setup's (levels 3 and 4) is the one stated rule:
x (a tuned suite's MFU on the setup's GPU / the same suite's on the row's GPU), the median
over suites that measured both GPUs themselves (same network where they did) -- the plain /
tuned ratio measured on the row's GPU, applied to the tuned rows of the setup's own GPU. A
generation's efficiency (Hopper reaches a smaller share of its larger peak than Ampere) and a
card's (a GeForce RTX 3090 reaches a larger share of its fp32-accumulate peak than an A100 of
its own) then carry over as measured. Where no suite measured both GPUs: in one architecture
by their peak ratio (the MFU as it is); across generations the suites' MFU on each GPU's
architecture; else the MFU of the nearest architecture as it is.

A network whose family (flops.family: convnext, vit, swin, ...) has no calibration row of any
kind takes the MFU its GPU reaches on the networks that have rows (the levels above: the same
fraction of peak, charged at the network's own counted FLOPs), and its band widens by a
further +-families.FAMILY_MARGIN, said in the basis: how well a family's kernels use a GPU is what
the rows would have told.

Within a level, rows at the batch per device nearest the setup's (within a factor of 2 of
the nearest) count: small batches leave a GPU idle. The point is their median; the band
their range widened by the level's margin. Plain predictions are capped by the best record
row (MLPerf) of the same network on the GPU (or its architecture): a plain loop does not
beat a record. Reference rows are no ceiling: on the RTX 3090 timm's plain NHWC loop (1,218
img/s) beats Lambda's reference NCHW run (905), and finetune's torch engine is NHWC too.
"""

from __future__ import annotations

import functools
import math
import statistics
from typing import Protocol

from finetune.estimate.perf import calibration, flops, gpus, multihost

MARGIN = {1: 0.15, 2: 0.20, 3: 0.25, 4: 0.40, 5: 0.50}  # +- band around the MFU range
DEFAULT_PLAIN_SHARE = 0.5  # where no cell was measured both ways: an assumption
DEFAULT_BATCH = 32  # a row that does not give its batch (the studies' tables)
RowMfu = tuple[calibration.Row, float]  # a calibration row and the MFU it implies
# (mfu, low, high, level, basis lines): what ``learned`` returns
Learned = tuple[float, float, float, int, tuple[str, ...]]


class MfuSetup(Protocol):
    """What learning an MFU reads of a setup (predict.Setup, or one cell of it)."""

    @property
    def gpu_model(self) -> str: ...
    @property
    def network(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def batch_per_device(self) -> int: ...
    @property
    def kind(self) -> str: ...


class Scaled(Protocol):
    """What scaling over devices reads of a setup or a calibration row."""

    @property
    def gpu_model(self) -> str: ...
    @property
    def gpus_per_host(self) -> int: ...
    @property
    def hosts(self) -> int: ...


LEVEL = {
    1: "same GPU and network",
    2: "same GPU, other networks",
    3: "same architecture, other GPUs",
    4: "no row of this kind in this GPU's generation: from other generations",
}


def batch_of(row: calibration.Row) -> int:
    return row.batch_per_device or DEFAULT_BATCH


def row_mfu(row: calibration.Row, exclude: frozenset[str] = frozenset()) -> float | None:
    """The MFU a calibration row implies (per device, after its scaling efficiency)."""
    count = flops.lookup(row.network, row.image_size)
    peak = gpus.peak_tflops(row.gpu_model, row.precision)
    if count is None or peak is None or row.images_per_sec <= 0:
        return None
    per_device = row.images_per_sec / row.devices
    if row.devices > 1:
        per_device /= efficiency(per_device, count, row, exclude, batch_of(row))
    return per_device * count.gflops * 1e9 / (peak[0] * 1e12)


def efficiency(
    per_device: float, count: flops.FlopCount, s: Scaled, exclude: frozenset[str], batch: int
) -> float:
    """The scaling efficiency of setup/row ``s`` at ``per_device`` images/s per device."""
    jitter, _ = multihost.fitted_jitter(exclude)
    link = multihost.link_for(getattr(s, "family", None), s.gpu_model)
    step = batch / per_device
    return multihost.efficiency(step, count.parameters, s.gpus_per_host, s.hosts, link, jitter)


def candidates(precision: str, exclude: frozenset[str], tuned: bool) -> list[RowMfu]:
    """[(row, mfu)] of one kind class at ``precision``'s class, rows in ``exclude`` left out."""
    return list(_candidates(gpus.precision_class(precision), exclude, tuned))


@functools.cache  # a plan prices hundreds of setups from the same rows
def _candidates(want: str, exclude: frozenset[str], tuned: bool) -> tuple[RowMfu, ...]:
    out: list[RowMfu] = []
    for row in calibration.rows():
        if row.id in exclude or row.tuned != tuned:
            continue
        if gpus.precision_class(row.precision) == want and (m := row_mfu(row, exclude)):
            out.append((row, m))
    return tuple(out)


def _near_batch(rows: list[RowMfu], batch: int) -> list[RowMfu]:
    """The rows whose batch is within a factor of 2 of the nearest to ``batch``."""

    def gap(r: calibration.Row) -> float:
        return abs(math.log(batch_of(r) / batch))

    best = min(gap(r) for r, _ in rows)
    return [(r, m) for r, m in rows if gap(r) <= best + math.log(2)]


def level_rows(
    gpu_model: str, network: str, batch: int, found: list[RowMfu]
) -> tuple[int, list[RowMfu]]:
    """Levels 1-3 for ``gpu_model``: (level, rows nearest in batch); (0, []) without any.
    Within the architecture, rows of the same network come first."""
    peak, arch = gpus.peak(gpu_model), gpus.architecture(gpu_model)
    net = flops.network_key(network)
    same_gpu = [(r, m) for r, m in found if gpus.peak(r.gpu_model) == peak]
    same_arch = [(r, m) for r, m in found if gpus.architecture(r.gpu_model) == arch]
    levels = ((1, _same_net(same_gpu, net)), (2, same_gpu),
              (3, _same_net(same_arch, net) or same_arch))  # fmt: skip
    for level, rows in levels:
        if rows:
            return level, _near_batch(rows, batch)
    return 0, []


def _same_net(rows: list[RowMfu], net: str | None) -> list[RowMfu]:
    return [(r, m) for r, m in rows if flops.network_key(r.network) == net]


def _by_source(
    gpu_model: str, network: str, batch: int, tuned: list[RowMfu], own: bool
) -> dict[str, float]:
    """{source: median tuned MFU of that benchmark suite on this GPU} (``own``: only where
    the suite measured this GPU itself; else also on its architecture)."""
    out: dict[str, float] = {}
    for source in {r.source for r, _ in tuned}:
        rows = [(r, m) for r, m in tuned if r.source == source]
        rows = _same_net(rows, flops.network_key(network)) or rows
        level, near = level_rows(gpu_model, network, batch, rows)
        if near and (level < 3 or not own):
            out[source] = statistics.median(m for _, m in near)
    return out


def _by_suite(
    setup: MfuSetup, found: list[RowMfu], tuned: list[RowMfu], own: bool
) -> tuple[list[RowMfu], list[str]]:
    """Each row's MFU x (a suite's MFU on the setup's GPU / on the row's GPU), the median
    over suites on both; rows without such a suite drop out. Also what it did, in words."""
    target = _by_source(setup.gpu_model, setup.network, setup.batch_per_device, tuned, own)
    out: list[RowMfu] = []
    how: dict[tuple[str, float], str] = {}
    for r, m in found:
        mine = _by_source(r.gpu_model, setup.network, batch_of(r), tuned, own)
        both = sorted(target.keys() & mine.keys())
        if both:
            ratio = statistics.median(target[s] / mine[s] for s in both)
            out.append((r, m * ratio))
            how[(r.gpu_model, ratio)] = f"x {ratio:.3f} from {r.gpu_model} ({_short(both)})"
    where = "" if own else " (the suites' rows on each GPU's architecture)"
    lines = [f"carried to {setup.gpu_model} by measured suite ratio{where}: " + "; ".join(
        list(how.values())[:3])] if out else []  # fmt: skip
    return out, lines


def _short(sources: list[str]) -> str:
    return ", ".join(s.split(",")[0].split(" (")[0] for s in sources)


def _transfer(
    setup: MfuSetup, level: int, found: list[RowMfu], tuned: list[RowMfu]
) -> tuple[list[RowMfu], list[str]]:
    """Levels 3 and 4: rows of other GPUs carried to the setup's GPU (the module's rule)."""
    if level == 3:
        out, how = _by_suite(setup, found, tuned, own=True)
        peak = f"carried to {setup.gpu_model} by the GPUs' peak ratio (no suite measured both)"
        return (out, how) if out else (found, [peak])
    found = _same_net(found, flops.network_key(setup.network)) or found
    for own in (True, False):
        out, how = _by_suite(setup, found, tuned, own)
        if out:
            return out, how
    arch = gpus.architecture(setup.gpu_model)
    apart = [gpus.generation_distance(arch, gpus.architecture(r.gpu_model)) for r, _ in found]
    near = [row for row, d in zip(found, apart, strict=True) if d == min(apart)]
    return near, ["no suite measured both: the nearest architecture's MFU as it is"]


def learn(
    setup: MfuSetup, exclude: frozenset[str], tuned: bool
) -> tuple[float, float, float, int, list[RowMfu], list[str]] | None:
    """(median MFU, low, high, level, rows, how they were carried over) from one kind class;
    None without rows."""
    found = candidates(setup.precision, exclude, tuned)
    if not found:
        return None
    level, rows = level_rows(setup.gpu_model, setup.network, setup.batch_per_device, found)
    if not rows:
        level, rows = 4, found
    how: list[str] = []
    if level >= 3:
        rows, how = _transfer(setup, level, rows, candidates(setup.precision, exclude, True))
    mfus = [m for _, m in rows]
    margin = MARGIN[level]
    low, high = min(mfus) * (1 - margin), max(mfus) * (1 + margin)
    return statistics.median(mfus), low, high, level, rows, how
