"""The MFU learned for one setup, cached per cell, with its basis lines: mfu.learn's levels
1-4 over plain-loop rows (capped by the record rows of the same network), else level 5 --
tuned rows x the plain share, what a plain loop keeps of a tuned rate where cells were
measured both ways (mfu.py's docstring states the rules)."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from finetune.estimate.perf import calibration, flops, gpus
from finetune.estimate.perf.mfu import (
    DEFAULT_PLAIN_SHARE,
    LEVEL,
    MARGIN,
    Learned,
    MfuSetup,
    RowMfu,
    candidates,
    learn,
    level_rows,
    row_mfu,
)


def plain_share(exclude: frozenset[str] = frozenset()) -> tuple[float, int]:
    """(median plain-loop MFU / tuned MFU over cells measured both ways, how many cells):
    what a plain loop keeps of a tuned benchmark on the same GPU, network and precision."""
    tuned: dict[tuple[str, str | None, str], list[float]] = {}
    for row in calibration.rows():
        if row.tuned and row.id not in exclude and (m := row_mfu(row, exclude)):
            tuned.setdefault(_cell(row), []).append(m)
    ratios = [
        m / statistics.median(tuned[_cell(row)])
        for row in calibration.rows()
        if not row.tuned and row.id not in exclude and _cell(row) in tuned
        if (m := row_mfu(row, exclude))
    ]
    return (statistics.median(ratios), len(ratios)) if ratios else (DEFAULT_PLAIN_SHARE, 0)


def _cell(row: calibration.Row) -> tuple[str, str | None, str]:
    peak = gpus.peak(row.gpu_model)
    net = flops.network_key(row.network)
    return peak.model if peak else row.gpu_model, net, gpus.precision_class(row.precision)


def learned(setup: MfuSetup, exclude: frozenset[str] = frozenset()) -> Learned | None:
    """(mfu, low, high, level, basis lines) for ``setup``; None without any usable row.
    Only the GPU, network, precision, batch and kind matter here (not hosts or CPUs), so a
    plan pricing hundreds of setups learns each cell once."""
    key = (setup.gpu_model, setup.network, setup.precision, setup.batch_per_device, setup.kind)
    return _learned(key, exclude)


@dataclass(frozen=True)
class _Cell:
    """The part of a setup an MFU is learned for (``learned``'s cache key)."""

    gpu_model: str
    network: str
    precision: str
    batch_per_device: int
    kind: str


@functools.lru_cache(maxsize=4096)
def _learned(key: tuple[str, str, str, int, str], exclude: frozenset[str]) -> Learned | None:
    setup = _Cell(*key)
    tuned = setup.kind in calibration.TUNED
    got = learn(setup, exclude, tuned)
    if got is None and not tuned:
        return _from_tuned(setup, exclude)
    if got is None:
        return None
    point, low, high, level, rows, how = got
    what = "tuned (record/reference)" if tuned else "plain-loop"
    basis = [
        f"MFU {point:.1%} (band {low:.1%}-{high:.1%}): median of {len(rows)} {what} "
        f"calibration row(s), {LEVEL[level]}: {_ids(rows)}",
        *how,
    ]
    if not tuned:
        point, low, high = _tuned_bound(setup, exclude, (point, low, high), basis)
    return point, low, high, level, tuple(basis)


def _from_tuned(setup: MfuSetup, exclude: frozenset[str]) -> Learned | None:
    """Level 5: no plain-loop row at this precision class: tuned MFU x the plain share."""
    got = learn(setup, exclude, True)
    if got is None:
        return None
    point, low, high, level, rows, _how = got
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
    return point, low, high, 5, tuple(basis)


def _ids(rows: Sequence[RowMfu]) -> str:
    return ", ".join(r.id for r, _ in rows[:4]) + (f", ... ({len(rows)})" if len(rows) > 4 else "")


def _tuned_bound(
    setup: MfuSetup,
    exclude: frozenset[str],
    mfus: tuple[float, float, float],
    basis: list[str],
) -> tuple[float, float, float]:
    """A plain loop does not beat a record row of the same network on the same GPU (or
    architecture): cap the MFU and its band there."""
    net = flops.network_key(setup.network)
    same_net = [
        (r, m)
        for r, m in candidates(setup.precision, exclude, True)
        if flops.network_key(r.network) == net and r.kind == "record"
    ]
    _level, bound = level_rows(setup.gpu_model, setup.network, setup.batch_per_device, same_net)
    if not bound:
        return mfus
    row, top = max(bound, key=lambda rm: rm[1])
    if top < mfus[2]:
        basis.append(f"record rows bound the MFU at {top:.1%} ({row.cite()})")
    point, low, high = mfus
    return min(point, top), min(low, top), min(high, top)
