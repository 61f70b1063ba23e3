"""Plots of a report: speedup against ideal by GPU count, and euros against wall time.

matplotlib is imported inside the functions, with the Agg backend (no display needed); the
file format follows the extension (.png or .svg).
"""

from __future__ import annotations

from pathlib import Path

from finetune.errors import UsageError, require_module
from finetune.report.render import Report

SUFFIXES = (".png", ".svg")


def _pyplot():
    matplotlib = require_module("matplotlib", extra="train")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _check_path(path: str | Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise UsageError(
            f"Cannot plot to {path.name}: the format follows the extension.",
            f"name the file with one of {', '.join(SUFFIXES)}, e.g. scaling.png.",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _save(fig, plt, path: Path, provenance: str) -> Path:
    fig.text(0.01, 0.01, provenance, fontsize=6, color="0.4", wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, format=path.suffix.lower()[1:], dpi=120)
    plt.close(fig)
    return path


def plot_scaling(report: Report, path: str | Path) -> Path:
    """Speedup vs GPU count per recipe/dataset/instance family, with the ideal line."""
    path = _check_path(path)
    rows = [r for r in report.rows if r.speedup is not None]
    if not rows:
        raise UsageError(
            "No run has a speedup to plot (each needs a 1-GPU baseline with throughput metrics).",
            "run the same recipe and dataset on 1 GPU too, then plot again.",
        )
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    top = max(r.gpus for r in rows)
    ax.plot([1, top], [1, top], linestyle="--", color="0.5", label="ideal (linear)")
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(f"{r.recipe} / {r.dataset} / {r.instance_type.split('.')[0]}", []).append(
            r
        )
    for label, group in groups.items():
        group.sort(key=lambda r: r.gpus)
        ax.plot([r.gpus for r in group], [r.speedup for r in group], marker="o", label=label)
        for r in group:
            ax.annotate(
                f"{r.efficiency:.0%}",
                (r.gpus, r.speedup),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
            )
    ax.set(xlabel="GPUs", ylabel="speedup vs 1 GPU", title="Scaling (labels: efficiency)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, plt, path, report.provenance)


def plot_cost_vs_time(report: Report, path: str | Path) -> Path:
    """Each run as a point: wall time (minutes) against euros, labelled by instance and GPUs."""
    path = _check_path(path)
    if not report.rows:
        raise UsageError("There are no runs to plot.", "finish a run first (`finetune launch`).")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for r in report.rows:
        ax.scatter(r.wall_seconds / 60, r.eur, marker="s" if r.spot else "o")
        label = (
            f"{r.instance_type} x{r.instance_count}" if r.instance_count > 1 else r.instance_type
        )
        ax.annotate(
            f"{label} ({r.gpus} GPU)",
            (r.wall_seconds / 60, r.eur),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
        )
    ax.set(xlabel="wall time (minutes)", ylabel="cost (EUR)", title="Cost vs time (squares: spot)")
    ax.grid(alpha=0.3)
    return _save(fig, plt, path, report.provenance)
