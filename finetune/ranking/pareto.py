"""The Pareto front of (time, euros): the choices no other choice beats on both."""

from __future__ import annotations

from collections.abc import Sequence


def front(points: Sequence[tuple[float, float]]) -> set[int]:
    """Indices of the points (seconds, euros) that no other point dominates: none is as fast
    and as cheap with one of the two strictly better. Equal points are all on the front."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    on: set[int] = set()
    best = float("inf")  # best: the least euros among faster-or-equal points
    k = 0
    while k < len(order):
        # points of one time are judged together: only their cheapest can be on the front
        j = k
        while j < len(order) and points[order[j]][0] == points[order[k]][0]:
            j += 1
        same = order[k:j]
        cheapest = min(points[i][1] for i in same)
        if cheapest < best:
            on.update(i for i in same if points[i][1] == cheapest)
            best = cheapest
        k = j
    return on
