"""`finetune plan --plot FILE`: every candidate's time against its euros, the Pareto front
highlighted. matplotlib is imported only here (report.plot's lazy import and safe write)."""

from __future__ import annotations

from pathlib import Path

from finetune.errors import UsageError
from finetune.ranking.rank import PlanResult
from finetune.report.plot import _pyplot, _save, check_path


def plot_plan(result: PlanResult, path: str | Path) -> Path:
    """Minutes against euros, one point per candidate (squares: spot); the front drawn as a
    line with its points named; written beside ``path`` then renamed."""
    path = check_path(path)
    if not result.rows:
        raise UsageError(
            "there is nothing to plot: no candidate has a time and euros estimate",
            "widen the search (--region, --backend, --spot/--no-spot) or check the notes.",
        )
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for spot, marker in ((False, "o"), (True, "s")):
        pts = [r for r in result.rows if (r.market == "spot") == spot and not r.pareto]
        ax.scatter([r.minutes for r in pts], [r.eur for r in pts], marker=marker, s=14,
                   color="0.7", label=f"{'spot' if spot else 'on-demand'}")  # fmt: skip
    front = sorted((r for r in result.rows if r.pareto), key=lambda r: r.minutes)
    ax.plot([r.minutes for r in front], [r.eur for r in front], "-o", color="C3", markersize=5,
            label="Pareto front")  # fmt: skip
    for r in front:
        ax.annotate(f"{r.hosts}x {r.instance} {r.market}", (r.minutes, r.eur), fontsize=6,
                    xytext=(3, 3), textcoords="offset points")  # fmt: skip
    ax.set(xlabel="predicted time (minutes)", ylabel="predicted cost (EUR)",
           title="Every way to run the recipe: time vs euros")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return _save(fig, plt, path, result.provenance)
