"""Issue 49, S5-8: the secret screen reads a text in time linear in its length. Its input is
the user's plan strings (a shared dataset's class names among them), so a pattern that
backtracks quadratically -- `_ASSIGNED`'s old unbounded name prefix on a long run of "a."
-- stalls every launch (docs/decisions/161-secret-screen.md has the figures).

Why a timing ratio here (DESIGN.md otherwise keeps timings in benchmarks): a ratio measured
in the same test on the same machine is what shows the growth. Each text is made 4x longer
twice (16k, 64k, 256k characters, timed in this thread's CPU time, which other processes
on a busy machine do not add to, the best of three interleaved rounds kept); linear time
grows 4x per step, quadratic 16x, so each step must stay under 8x. 16k characters must
also take under a second (a hundred times what the linear screen needs), so a quadratic
screen fails here at once instead of running for an hour."""

from __future__ import annotations

import time

import pytest

from finetune.backends import secretscan

SIZES = (16_384, 65_536, 262_144)
# texts that made a pattern backtrack (each a unit repeated), and the new shapes' prefixes
UNITS = ["a.", "a-", "eyJ-", "sk-", "secret= ", "basic ", "SG.", "8Q~", "wandb ", "x"]


def _best(texts: list[str], rounds: int = 3) -> list[float]:
    best = [float("inf")] * len(texts)
    for _ in range(rounds):
        for i, text in enumerate(texts):
            start = time.thread_time()
            secretscan.value_kind(text)
            best[i] = min(best[i], time.thread_time() - start)
    return best


@pytest.mark.parametrize("unit", UNITS)
def test_the_screen_is_linear_in_the_texts_length(unit):
    texts = [(unit * (n // len(unit) + 1))[:n] for n in SIZES]
    (first,) = _best(texts[:1], rounds=1)
    assert first < 1.0, f"{SIZES[0]} characters of {unit!r} took {first:.1f} s"
    t16, t64, t256 = _best(texts)
    assert t64 < 8 * t16 and t256 < 8 * t64, (unit, t16, t64, t256)
