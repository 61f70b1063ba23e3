"""Scaling efficiency from a communication model: a ring all-reduce of the fp32 gradient over
each device's link (interconnect.csv), overlapped with backward but for the last bucket, plus
a straggler term whose one constant (JITTER) is fitted to every pair of calibration rows that
measured the same setup on 1 and on n devices (docs/cost.md)."""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass
from typing import Protocol

from finetune.catalog._files import read_rows
from finetune.estimate.perf import calibration, flops, gpus
from finetune.estimate.perf._data import perf_text

FILE = "interconnect.csv"
HEADER = ("Family", "GpuModel", "IntraHost", "IntraGBps", "NetworkGbps", "Source", "Notes")
LINK_FRACTION = 0.7  # achieved / nominal link rate: NCCL's bus bandwidth on PCIe and NVLink
BACKWARD_SHARE = 2 / 3  # of a step's FLOPs: backward = 2 x forward
BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's default bucket (bucket_cap_mb=25)
GRADIENT_BYTES = 4  # fp32 gradients
DEFAULT_JITTER = 0.03  # only where no calibration pair is left to fit it from


class Scaled(Protocol):
    """What scaling over devices reads of a setup or a calibration row."""

    @property
    def gpu_model(self) -> str: ...
    @property
    def gpus_per_host(self) -> int: ...
    @property
    def hosts(self) -> int: ...


@dataclass(frozen=True)
class Link:
    """How one instance family's GPUs talk: inside the host and to other hosts."""

    family: str
    gpu_model: str
    intra: str
    intra_gbytes: float  # GB/s per direction per GPU, nominal
    network_gbits: float  # Gbit/s per host
    source: str


@functools.cache
def links() -> tuple[Link, ...]:
    """Every family in interconnect.csv."""
    rows = read_rows(perf_text(FILE), HEADER, FILE)
    return tuple(
        Link(
            r["Family"],
            r["GpuModel"],
            r["IntraHost"],
            float(r["IntraGBps"]),
            float(r["NetworkGbps"]),
            r["Source"],
        )
        for r in rows
    )


# A GPU AWS does not rent (a workstation card in a published benchmark): PCIe gen4, stated.
WORKSTATION = Link("(not AWS)", "", "PCIe gen4 (assumed)", 31.5, 100.0, "assumption")


def link_for(family: str | None = None, gpu_model: str | None = None) -> Link:
    """The family's link; else the first family with this GPU; else PCIe gen4 (assumed)."""
    for link in links():
        if family and link.family == family:
            return link
    want = gpus.peak(gpu_model or "")
    for link in links():
        if want is not None and gpus.peak(link.gpu_model) == want:
            return link
    return WORKSTATION


def straggler_z(devices: int) -> float:
    """Expected maximum of ``devices`` standard normal draws (Blom's approximation)."""
    if devices <= 1:
        return 0.0
    return statistics.NormalDist().inv_cdf((devices - 0.375) / (devices + 0.25))


def exposed_comm_seconds(
    step_s: float, params: int, per_host: int, hosts: int, link: Link
) -> float:
    """Seconds per step the all-reduce adds beyond what backward hides."""
    nbytes = params * GRADIENT_BYTES
    total = 0.0
    if per_host > 1:
        total += 2 * (per_host - 1) / per_host * nbytes / (link.intra_gbytes * 1e9 * LINK_FRACTION)
    if hosts > 1:
        net = link.network_gbits / 8 * 1e9 * LINK_FRACTION
        total += 2 * (hosts - 1) / hosts * nbytes / net
    last_bucket = total * min(1.0, BUCKET_BYTES / nbytes)
    return max(total - BACKWARD_SHARE * step_s, last_bucket)


def efficiency(
    step_s: float, params: int, per_host: int, hosts: int, link: Link, jitter: float
) -> float:
    """Throughput of n devices / (n x one device's), for a step of ``step_s`` on one."""
    if per_host * hosts <= 1:
        return 1.0
    wait = exposed_comm_seconds(step_s, params, per_host, hosts, link)
    wait += step_s * jitter * straggler_z(per_host * hosts)
    return step_s / (step_s + wait)


def _pairs(exclude: frozenset[str]) -> list[tuple[calibration.Row, calibration.Row]]:
    """(one-device row, n-device row) of the same setup and source."""

    def key(r: calibration.Row) -> tuple[object, ...]:
        return (r.network, r.image_size, r.gpu_model, r.precision, r.batch_per_device,
                r.framework, r.source, r.kind)  # fmt: skip

    rows = [r for r in calibration.rows() if r.id not in exclude]
    ones = {key(r): r for r in rows if r.devices == 1}
    return [(ones[key(r)], r) for r in rows if r.devices > 1 and key(r) in ones]


@functools.cache
def fitted_jitter(exclude: frozenset[str] = frozenset()) -> tuple[float, tuple[str, ...]]:
    """(JITTER, the ids of the multi-device rows it was fitted to), rows in ``exclude`` left
    out. Each pair implies the jitter that closes the gap left by the communication term."""
    implied, used = [], []
    for one, many in _pairs(exclude):
        count = flops.lookup(one.network, one.image_size)
        if count is None or one.batch_per_device <= 0:
            continue
        step = one.batch_per_device / one.images_per_sec
        eff = many.images_per_sec / (many.devices * one.images_per_sec)
        link = link_for(gpu_model=many.gpu_model)
        comm = exposed_comm_seconds(step, count.parameters, many.gpus_per_host, many.hosts, link)
        gap = step / min(eff, 1.0) - step - comm
        implied.append(max(gap, 0.0) / (step * straggler_z(many.devices)))
        used.append(many.id)
    if not implied:
        return DEFAULT_JITTER, ()
    return statistics.median(implied), tuple(used)


def describe(
    eff: float, per_host: int, hosts: int, link: Link, jitter: float, fitted_to: tuple[str, ...]
) -> str:
    """One basis line: the efficiency and what it came from."""
    if per_host * hosts <= 1:
        return "one device: no gradient exchange"
    where = link.intra + ("" if hosts == 1 else f", {link.network_gbits:g} Gbit/s between hosts")
    fit = f"fitted to {len(fitted_to)} multi-GPU row(s)" if fitted_to else "default, no pair"
    return (
        f"{per_host * hosts} devices: {eff:.1%} scaling efficiency (ring all-reduce over "
        f"{where} ({link.source}), overlapped with backward; straggler jitter {jitter:.3f}, "
        f"{fit})"
    )


def at_rate(
    per_device: float, parameters: int, s: Scaled, exclude: frozenset[str], batch: int
) -> float:
    """The scaling efficiency of setup or row ``s`` whose devices each train ``per_device``
    images/s (one step: ``batch`` / ``per_device`` seconds)."""
    jitter, _ = fitted_jitter(exclude)
    link = link_for(getattr(s, "family", None), s.gpu_model)
    return efficiency(batch / per_device, parameters, s.gpus_per_host, s.hosts, link, jitter)
