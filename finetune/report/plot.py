"""Plots of a report: speedup against ideal by GPU count, and euros against wall time.

matplotlib is imported inside the functions, with the Agg backend (no display needed); the
file format follows the extension (.png or .svg).
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from finetune.errors import DataError, UsageError, require_module
from finetune.report.render import Report

SUFFIXES = (".png", ".svg")


def _pyplot():
    matplotlib = require_module("matplotlib", extra="train")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def check_path(path: str | Path) -> Path:
    """The plot's path, checked before any work: a known extension, in a folder that exists
    (folders are never created: a typo must not make one at the filesystem root)."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise UsageError(
            f"Cannot plot to {path.name}: the format follows the extension.",
            f"name the file with one of {', '.join(SUFFIXES)}, e.g. scaling.png.",
        )
    if not path.parent.is_dir():
        raise UsageError(
            f"Cannot plot to {path}: the folder {path.parent} does not exist.",
            "create the folder first, or give a path in an existing folder.",
        )
    return path


_check_path = check_path


def _save(fig, plt, path: Path, provenance: str) -> Path:
    """Write beside the target, then rename: a failed write leaves no half-made file."""
    import os

    fig.text(0.01, 0.01, provenance, fontsize=6, color="0.4", wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fig.savefig(tmp, format=path.suffix.lower()[1:], dpi=120)
        os.replace(tmp, path)
    except OSError as exc:
        with suppress(OSError):  # a read-only file system refuses even this
            tmp.unlink(missing_ok=True)
        raise DataError(
            f"Cannot write the plot to {path}: {exc.strerror or exc}",
            "give --plot a path in a writable folder on a disk with free space.",
        ) from None
    finally:
        plt.close(fig)
    return path


def _scaling_rows(report: Report) -> list:
    return [r for r in report.rows if r.speedup is not None]


def _draw_scaling(ax, rows) -> None:
    top = max(r.gpus for r in rows)
    ax.plot([1, top], [1, top], linestyle="--", color="0.5", label="ideal (linear)")
    groups: dict[str, list] = {}
    for r in rows:
        family = r.instance_type.removeprefix("ml.").split(".")[0]
        groups.setdefault(f"{r.recipe} / {r.dataset} / {family}", []).append(r)
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


def _draw_cost(ax, rows) -> None:
    for r in (r for r in rows if r.eur is not None):  # a run without a price has no point
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
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)  # from zero, so distances between runs read as real differences
    ax.grid(alpha=0.3)


def _no_speedup() -> UsageError:
    return UsageError(
        "No run has a speedup to plot (each needs a 1-GPU baseline with throughput metrics).",
        "run the same recipe and dataset on 1 GPU too, then plot again.",
    )


def _no_runs() -> UsageError:
    return UsageError("There are no runs to plot.", "finish a run first (`finetune launch`).")


def plot_scaling(report: Report, path: str | Path) -> Path:
    """Speedup vs GPU count per recipe/dataset/instance family, with the ideal line."""
    path = _check_path(path)
    rows = _scaling_rows(report)
    if not rows:
        raise _no_speedup()
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    _draw_scaling(ax, rows)
    return _save(fig, plt, path, report.provenance)


def plot_cost_vs_time(report: Report, path: str | Path) -> Path:
    """Each run as a point: wall time (minutes) against euros, labelled by instance and GPUs."""
    path = _check_path(path)
    if not report.rows:
        raise _no_runs()
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    _draw_cost(ax, report.rows)
    return _save(fig, plt, path, report.provenance)


def plot_report(report: Report, path: str | Path) -> Path:
    """Both views in one figure: scaling on the left (when any run has a 1-GPU baseline),
    cost against time on the right. What `cost-report --plot` writes."""
    path = _check_path(path)
    if not report.rows:
        raise _no_runs()
    rows = _scaling_rows(report)
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2 if rows else 1, figsize=(12 if rows else 6, 4.8), squeeze=False)
    if rows:
        _draw_scaling(axes[0][0], rows)
    _draw_cost(axes[0][-1], report.rows)
    return _save(fig, plt, path, report.provenance)
