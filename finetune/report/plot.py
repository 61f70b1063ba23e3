"""Plots of a report: speedup against ideal by GPU count, and euros against wall time.

matplotlib is imported inside the functions, with the Agg backend (no display needed); the
file format follows the extension (.png or .svg).
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from finetune.adaptors import matplotlib
from finetune.errors import DataError, UsageError
from finetune.report.render import Report

SUFFIXES = (".png", ".svg")
# Written into every plot's metadata (PNG text chunk, SVG dc:creator): a file that exists at
# --plot is replaced only when it carries this, i.e. an earlier plot of finetune's.
CREATOR = "finetune report plot"
_OWN_PLOT_MAX_BYTES = 16 << 20  # our plots are a few hundred kB; a larger file is not one


def _pyplot():
    matplotlib.use("Agg", force=True)  # before pyplot's import: files, no display
    return matplotlib.pyplot


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
    if (path.exists() or path.is_symlink()) and not _own_plot(path):
        raise UsageError(
            f"Cannot plot to {path}: it exists and is not a plot finetune wrote, so it is "
            "not replaced.",
            "give --plot a new file name, or move that file away yourself.",
        )
    return path


def _own_plot(path: Path) -> bool:
    """Whether ``path`` is a regular file an earlier plot wrote (its metadata says so)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _OWN_PLOT_MAX_BYTES:
            return False
        return CREATOR.encode() in path.read_bytes()
    except OSError:
        return False


_check_path = check_path


def _save(fig, plt, path: Path, provenance: str) -> Path:
    """Write beside the target, then rename: a failed write leaves no half-made file."""
    fig.text(0.01, 0.01, provenance, fontsize=6, color="0.4", wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fmt = path.suffix.lower()[1:]
        fig.savefig(tmp, format=fmt, dpi=120, metadata={"Creator": CREATOR})
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


def _done(report: Report) -> list:
    """The rows worth plotting: completed runs (failed ones are left out)."""
    return [r for r in report.rows if r.status == "completed"]


def _scaling_rows(report: Report) -> list:
    return [r for r in _done(report) if r.speedup is not None]


def _series(r) -> str:
    family = r.instance_type.removeprefix("ml.").split(".")[0]
    engine = f" / {r.engine}" if r.engine else ""
    return f"{r.recipe}{engine} / {family}"


def _draw_scaling(ax, rows) -> None:
    """Speedup against devices per series, each from its baseline (1, 1); integer axis."""
    top = max(r.devices for r in rows)
    ax.plot([1, top], [1, top], linestyle="--", color="0.5", label="ideal (linear)")
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(_series(r), []).append(r)
    for label, group in groups.items():
        group.sort(key=lambda r: r.devices)
        effs = ", ".join(f"{r.devices}: {r.efficiency:.0%}" for r in group)
        xs, ys = [1] + [r.devices for r in group], [1.0] + [r.speedup for r in group]
        ax.plot(xs, ys, marker="o", label=f"{label} (efficiency {effs})")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set(xlabel="devices", ylabel="speedup vs 1 device", title="Scaling")
    ax.set_xlim(left=0.5, right=top + 0.5)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (time, euros) points no other point beats on both, fastest first."""
    front, cheapest = [], float("inf")
    for t, e in sorted(points):
        if e < cheapest:
            front.append((t, e))
            cheapest = e
    return front


def _draw_cost(ax, rows) -> None:
    """Each completed run with a price: wall minutes against euros, one legend entry per
    instance and engine (squares: spot), and the Pareto front of time and money."""
    priced = [r for r in rows if r.eur is not None and r.status == "completed"]
    markers: dict[str, list] = {}
    for r in priced:
        name = f"{r.hosts}x {r.instance_type}" if r.hosts > 1 else r.instance_type
        label = f"{name}{' ' + r.engine if r.engine else ''}{' spot' if r.spot else ''}"
        markers.setdefault(label, []).append(r)
    for label, group in markers.items():
        ax.scatter(
            [r.wall_seconds / 60 for r in group],
            [r.eur for r in group],
            marker="s" if group[0].spot else "o",
            s=40,
            label=label,
        )
    front = pareto_front([(r.wall_seconds / 60, r.eur) for r in priced])
    if len(front) > 1:
        ax.step(
            *zip(*front, strict=True), where="post", color="0.3", linewidth=1, label="Pareto front"
        )
    ax.set(xlabel="wall time (minutes)", ylabel="cost (EUR)", title="Cost vs time")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)  # from zero, so distances between runs read as real differences
    ax.grid(alpha=0.3)
    if priced:
        ax.legend(fontsize=8, loc="best")


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
    fig, ax = plt.subplots(figsize=(7, 5))
    _draw_scaling(ax, rows)
    return _save(fig, plt, path, report.provenance)


def plot_cost_vs_time(report: Report, path: str | Path) -> Path:
    """Each run as a point: wall time (minutes) against euros, labelled by instance and GPUs."""
    path = _check_path(path)
    if not _done(report):
        raise _no_runs()
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    _draw_cost(ax, _done(report))
    return _save(fig, plt, path, report.provenance)


def plot_report(report: Report, path: str | Path) -> Path:
    """Both views in one figure: scaling on the left (when any run has a 1-GPU baseline),
    cost against time on the right. What `cost-report --plot` writes."""
    path = _check_path(path)
    if not _done(report):
        raise _no_runs()
    rows = _scaling_rows(report)
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2 if rows else 1, figsize=(14 if rows else 7, 5.5), squeeze=False)
    if rows:
        _draw_scaling(axes[0][0], rows)
    _draw_cost(axes[0][-1], _done(report))
    return _save(fig, plt, path, report.provenance)


# the demo's two curves (matplotlib's first two default colours, named so a test can find them)
FINE_COLOUR, SCRATCH_COLOUR = "#1f77b4", "#ff7f0e"


def plot_transfer(transfer, path: str | Path, provenance: str = "") -> Path:
    """The demo's learning curves (a finetune.service.demo_claim.Transfer): validation
    accuracy per epoch of the fine-tuned run and the run from scratch on the left, with the
    source model's, their training loss on the right. What `finetune demo` writes."""
    path = _check_path(path)
    plt = _pyplot()

    epochs = list(range(1, len(transfer.fine) + 1))
    fig, (acc, loss) = plt.subplots(1, 2, figsize=(11, 4.5))
    acc.plot(
        epochs,
        transfer.fine,
        marker="o",
        color=FINE_COLOUR,
        label="fine-tuned (from the source model)",
    )
    acc.plot(
        epochs,
        transfer.scratch,
        marker="s",
        color=SCRATCH_COLOUR,
        label="from scratch (random weights)",
    )
    if transfer.source_acc is not None:
        acc.axhline(transfer.source_acc, linestyle=":", color="0.5",
                    label=f"source model on its own task ({transfer.source_acc:.1%})")  # fmt: skip
    images = f", {transfer.val_count} images" if transfer.val_count else ""
    acc.set(xlabel="epoch", ylabel="validation accuracy", ylim=(0, 1.02),
            title=f"Target task: validation accuracy{images}")  # fmt: skip
    loss.plot(epochs, transfer.fine_loss, marker="o", color=FINE_COLOUR, label="fine-tuned")
    loss.plot(epochs, transfer.scratch_loss, marker="s", color=SCRATCH_COLOUR, label="from scratch")
    loss.set(xlabel="epoch", ylabel="training loss (epoch mean)", title="Training loss")
    loss.set_ylim(bottom=0)
    for ax in (acc, loss):
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlim(0.5, len(epochs) + 0.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    verdict = ("transfer holds" if transfer.holds else "transfer DOES NOT HOLD") if (
        transfer.judged) else "not judged at these sizes"  # fmt: skip
    fig.suptitle(f"Fine-tuned vs from scratch, final gain {transfer.final_gain:+.3f}: {verdict}")
    return _save(fig, plt, path, provenance)
