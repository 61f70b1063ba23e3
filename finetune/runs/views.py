"""Runs as data (for --json) and as lines (for people)."""

from __future__ import annotations

from datetime import UTC, datetime

from finetune.metrics import EpochMetrics
from finetune.runs.ledger import Run


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = round(seconds)
    return (
        f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"
        if s >= 3600
        else f"{s // 60}m{s % 60:02d}s"
    )


def steady_throughput(epochs: list[EpochMetrics]) -> float | None:
    """Images/s of the run in steady state: the median over epochs (each already excludes
    its warm-up batches), so one slow epoch (first-epoch compilation, a noisy neighbour) does
    not move it."""
    rates = sorted(e.samples_per_sec for e in epochs if e.samples_per_sec > 0)
    if not rates:
        return None
    mid = len(rates) // 2
    return rates[mid] if len(rates) % 2 else (rates[mid - 1] + rates[mid]) / 2


def run_dict(run: Run, epochs: list[EpochMetrics]) -> dict:
    d = {k: v for k, v in run.__dict__.items() if k != "plan"}
    d["wall_seconds"] = run.wall_seconds
    d["gpus"] = run.gpus
    d["images_per_sec"] = steady_throughput(epochs)
    d["best_val_acc"] = max((e.val_acc for e in epochs if e.val_acc is not None), default=None)
    d["epochs"] = [e.model_dump() for e in epochs]
    d["hyperparameters"] = run.plan.get("hyperparameters", {})
    d["derived"] = run.plan.get("derived", {})
    return d


def list_rows(runs: list[Run], best: dict[str, float | None]) -> list[tuple[str, ...]]:
    rows = [("RUN", "RECIPE", "BACKEND", "DEVICES", "STATUS", "STARTED", "WALL", "BEST VAL")]
    for r in runs:
        acc = best.get(r.id)
        devices = f"{r.gpus} {r.device_kind}" + (f" {r.instance_type}" if r.instance_type else "")
        rows.append(
            (
                r.id,
                r.recipe,
                r.backend,
                devices,
                r.status,
                _when(r.created_at),
                duration(r.wall_seconds),
                f"{acc:.3f}" if acc is not None else "-",
            )
        )
    return rows


def show_lines(run: Run, epochs: list[EpochMetrics]) -> list[str]:
    d = run.plan.get("derived", {})
    hp = run.plan.get("hyperparameters", {})
    tp = steady_throughput(epochs)
    lines = [
        f"Run {run.id}: {run.status}" + (f" ({run.exit_reason})" if run.exit_reason else ""),
        f"  recipe     {run.recipe}  (model {hp.get('model', '?')})",
        f"  dataset    {run.dataset}",
        f"  backend    {run.backend}, {run.gpus} x {run.device_kind}"
        + (f", {run.instance_count} x {run.instance_type}" if run.instance_type else "")
        + (" (spot)" if run.spot else ""),
        f"  batch/lr   global batch {d.get('global_batch', '?')}, lr {d.get('lr', '?')}",
        f"  started    {_when(run.started_at)}; wall {duration(run.wall_seconds)}",
    ]
    lines += _billing_lines(run)
    if tp:
        lines.append(
            f"  throughput {tp:,.1f} img/s steady ({tp / max(run.gpus, 1):,.1f} per device)"
        )
    for e in epochs:
        val = f"{e.val_acc:.3f}" if e.val_acc is not None else "-"
        lines.append(
            f"  epoch {e.epoch + 1:>3}  {e.samples_per_sec:9,.1f} img/s  "
            f"{e.epoch_seconds:7.1f} s  loss {e.train_loss:.3f}  "
            f"train {e.train_acc:.3f}  val {val}"
        )
    if run.run_dir:
        lines.append(f"  files      {run.run_dir}")
    return lines


def _billing_lines(run: Run) -> list[str]:
    """What the cloud measured and charged: training, billable and interrupted time, euros."""
    parts = []
    if run.training_seconds is not None:
        parts.append(f"training {duration(run.training_seconds)}")
    if run.billable_seconds is not None:
        parts.append(f"billable {duration(run.billable_seconds)}")
        if run.training_seconds and run.spot:
            saved = 1 - run.billable_seconds / run.training_seconds
            parts.append(f"spot saving {saved:.0%}")
    if run.interrupted_seconds:
        parts.append(f"interrupted {duration(run.interrupted_seconds)}")
    lines = [f"  time       {', '.join(parts)}"] if parts else []
    if run.cost_eur is not None:
        lines.append(f"  cost       EUR {run.cost_eur:.2f}")
    return lines
