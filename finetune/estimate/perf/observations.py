"""Every figure the model learns from, as the roofline sees it: a published row
(calibration.csv) or a gpu-check row (measured.csv), its stack, its GPU, the work of one of
its images at 100 % of each roof (roofline.Work) and the seconds one image took per device.

A multi-device figure is turned into one device's by the communication model
(multihost.py, its straggler term refitted without the rows left out), as the model scales
one device's prediction back up. A row whose network, GPU or precision the tables lack is
not an observation (none of the bundled rows).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from finetune.estimate.perf import (
    calibration,
    flops,
    gpus,
    measured,
    multihost,
    roofline,
    stacks,
    traffic,
)

DEFAULT_BATCH = 32  # a row that does not give its batch (the studies' tables)


@dataclass(frozen=True)
class Obs:
    id: str
    source: str  # the publication (calibration.csv's Source up to its first comma)
    stack: stacks.Stack
    gpu: str  # gpu_peaks.csv's model
    network: str  # train_traffic.csv's name
    family: str
    precision: str  # fp32 or mixed (gpus.precision_class)
    batch: int  # per device
    work: roofline.Work
    seconds: float  # per image on one device, observed


def source_of(text: str) -> str:
    """'MLPerf Training v4.0, closed division, ...' -> 'MLPerf Training v4.0'."""
    return text.split(",")[0].split(" (")[0].strip()


@functools.cache
def observations(exclude: frozenset[str] = frozenset()) -> tuple[Obs, ...]:
    """Every usable row not in ``exclude`` (the scaling model refitted without those)."""
    jitter, _ = multihost.fitted_jitter(exclude)
    out: list[Obs] = []
    for row in calibration.rows():
        if row.id in exclude:
            continue
        batch = row.batch_per_device or DEFAULT_BATCH
        got = _obs(row.id, source_of(row.source), stacks.of_row(row), row.gpu_model,
                   row.network, row.precision, row.image_size, batch)  # fmt: skip
        if got is None:
            continue
        per_device = row.images_per_sec / row.devices
        if row.devices > 1:
            link = multihost.link_for(None, row.gpu_model)
            per_device /= multihost.efficiency(
                batch / per_device, got[1].parameters, row.gpus_per_host, row.hosts, link, jitter
            )  # fmt: skip
        out.append(_with_seconds(got[0], 1 / per_device))
    for m in measured.rows():
        if m.id in exclude:
            continue
        got = _obs(m.id, "gpu-check", stacks.of_measured(m), m.gpu_model, m.network,
                   m.precision, m.image_size, m.batch)  # fmt: skip
        if got is not None:
            out.append(_with_seconds(got[0], 1 / m.images_per_sec))
    return tuple(out)


def _obs(
    rid: str, source: str, stack: stacks.Stack, gpu: str, network: str, precision: str,
    size: int, batch: int,
) -> tuple[Obs, traffic.Traffic] | None:  # fmt: skip
    t = traffic.lookup(network, size, precision)
    roofs = gpus.roofs(gpu, precision)
    if t is None or roofs is None:
        return None
    family = flops.family(network) or ""
    work = roofline.work(t, roofs, batch)
    return Obs(rid, source, stack, roofs.gpu, t.network, family, t.precision, batch, work,
               0.0), t  # fmt: skip


def _with_seconds(o: Obs, seconds: float) -> Obs:
    return replace(o, seconds=seconds)
