"""How far off a prediction may be: the band, from the backtest's own errors (bands.csv).

For each level of evidence (fit.Learned.level) the backtest that predicts rows at that
level measured the signed error (predicted - published) / published of every row: level 1
(the stack has rows on this GPU) by leaving one row out, level 2 (only on other GPUs) by
leaving the row's GPU out, level 3 (no row of the stack) by leaving its source out, and a
network family without any row by leaving the family out. The band is the 5th to 95th
percentile of those errors: a published figure F predicted as P within errors [lo, hi] lies
in [P / (1 + hi), P / (1 + lo)]. `benchmarks/estimate_backtest.py --write-data` rewrites
the file from the backtest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from finetune.catalog._files import read_rows
from finetune.estimate.perf._data import perf_text

FILE = "bands.csv"
HEADER = ("Level", "Backtest", "LowError", "HighError", "Rows", "Written")
QUANTILES = (0.05, 0.95)
FAMILY = "family"  # the extra band of a network family without any row


@dataclass(frozen=True)
class Band:
    level: str
    backtest: str
    low_error: float  # the QUANTILES[0] signed error
    high_error: float
    rows: int

    def around(self, rate: float) -> tuple[float, float]:
        """(low, high) images/s for a prediction of ``rate``."""
        return rate / (1 + self.high_error), rate / (1 + max(self.low_error, -0.95))

    def describe(self) -> str:
        return (
            f"band: the {self.backtest} backtest's errors at this level, "
            f"{self.low_error:+.0%} to {self.high_error:+.0%} (5th-95th percentile of "
            f"{self.rows} rows)"
        )


@functools.cache
def bands() -> dict[str, Band]:
    out = {}
    for r in read_rows(perf_text(FILE), HEADER, FILE):
        out[r["Level"]] = Band(r["Level"], r["Backtest"], float(r["LowError"]),
                               float(r["HighError"]), int(r["Rows"]))  # fmt: skip
    return out


def band(level: int, family_unseen: bool = False) -> Band:
    """The band at ``level`` (1-3), widened by the family band when no row of the network's
    family was learned from (errors compound: (1 + a)(1 + b) - 1)."""
    b = bands()[str(level)]
    if not family_unseen:
        return b
    f = bands()[FAMILY]
    return Band(
        f"{level}+{FAMILY}", f"{b.backtest} and {f.backtest}",
        (1 + b.low_error) * (1 + f.low_error) - 1, (1 + b.high_error) * (1 + f.high_error) - 1,
        min(b.rows, f.rows),
    )  # fmt: skip


def quantile(errors: list[float], q: float) -> float:
    """The ``q`` quantile of ``errors``, linear between ranks (numpy's default)."""
    s = sorted(errors)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
