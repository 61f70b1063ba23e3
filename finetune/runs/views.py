"""Runs as data (for --json) and as lines (for people)."""

from __future__ import annotations

from datetime import UTC, datetime

from finetune.contracts.metrics import EpochMetrics
from finetune.errors import FinetuneError
from finetune.estimate.cost import spot_savings
from finetune.report.text import duration as one_format
from finetune.report.text import fit, percent
from finetune.runs.charges import DAMAGED, money_or_problem
from finetune.runs.evaluation_view import evaluation_lines
from finetune.runs.facts import clock_note
from finetune.runs.run import Run
from finetune.runs.spend import done_share, spend


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _pct(fraction: float | None) -> str:
    """One format for a fraction shown to people (report.text.percent: '59.2 %')."""
    return percent(fraction)


def duration(seconds: float | None) -> str:
    """One format for a duration everywhere (report.text.duration: '7m 42s', '1h 02m')."""
    return one_format(seconds)


def steady_throughput(epochs: list[EpochMetrics]) -> float | None:
    """Images/s of the run in steady state: the median over epochs (each already excludes
    its warm-up batches), so one slow epoch (first-epoch compilation, a noisy neighbour) does
    not move it."""
    rates = sorted(e.samples_per_sec for e in epochs if e.samples_per_sec > 0)
    if not rates:
        return None
    mid = len(rates) // 2
    return rates[mid] if len(rates) % 2 else (rates[mid - 1] + rates[mid]) / 2


def final_facts(events: list[tuple[float, str, str]]) -> dict:
    """The facts recorded when the run ended (the ledger's last "final" event)."""
    import json

    for _, kind, message in reversed(events):
        if kind == "final":
            try:
                return json.loads(message)
            except ValueError:
                return {}
    return {}


def iso_time(ts: float | None) -> str | None:
    """A unix time as ISO 8601 with its zone (UTC): 'YYYY-MM-DDTHH:MM:SS+00:00'."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def _counted(record: dict, *keys: str) -> dict:  # the epoch indexes under ``keys`` from 1
    return {k: v + 1 if k in keys and isinstance(v, int) else v for k, v in record.items()}


def run_dict(run: Run, epochs: list[EpochMetrics], final: dict | None = None) -> dict:
    """The run as JSON: its ledger fields (times as ISO 8601 with zone), figures and epochs,
    counted from 1 as people read them (metrics.jsonl and the ledger keep the trainer's
    0-based index, contracts.metrics, which resumes rely on: this edge converts)."""
    d = {k: v for k, v in run.__dict__.items() if k != "plan"}
    for key, value in d.items():
        if key.endswith("_at") and isinstance(value, (int, float)):
            d[key] = iso_time(value)
    d["wall_seconds"] = run.wall_seconds
    d["gpus"] = run.gpus
    d["devices"] = devices(run)
    d["images_per_sec"] = steady_throughput(epochs)
    d["best_val_acc"] = max((e.val_acc for e in epochs if e.val_acc is not None), default=None)
    d["epochs"] = [_counted(e.model_dump(), "epoch", "best_epoch") | {"time": iso_time(e.time)
                   if e.time else None} for e in epochs]  # fmt: skip
    last = epochs[-1] if epochs else None
    d["model_epoch"] = _counted({"e": last.best_epoch if last else None}, "e")["e"]  # weights
    d["test_acc"] = last.test_acc if last else None
    for key in ("summary", "val_report", "test_report", "run_record"):
        got = (final or {}).get(key)
        d[key] = _counted(got, "epoch") if key.endswith("_report") and got else got
    m, problem = _money(run)
    d["money"] = m.to_dict() if m else None
    d["cost_eur"] = m.eur if m else None  # what estimate.money says, whatever an old record held
    s = spent(run, epochs) if problem is None else None
    d["eur_so_far"] = s.eur if s else None  # runs.spend: estimate.money over its charges so far
    d["eur_projected"] = s.projected if s else None
    d["problems"] = [*run.problems, *([problem] if problem else [])]
    d["notes"] = notes(run)
    d["hyperparameters"] = run.plan.get("hyperparameters", {})
    d["derived"] = run.plan.get("derived", {})
    return d


def _money(run: Run):
    """(estimate.money's Money for the run, None) or (None, why it cannot be costed)."""
    return money_or_problem(run)


def spent(run: Run, epochs: list[EpochMetrics]):
    """runs.spend's Spend for ``run`` (the share done from its epochs), None where nothing is
    billed or its record cannot be costed (the money's problem says why)."""
    total = int((run.plan.get("hyperparameters") or {}).get("epochs") or 0)
    try:
        return spend(run, done=done_share(len(epochs), total) if epochs else None)
    except (FinetuneError, *DAMAGED):
        return None


def spend_cell(data: dict) -> str:
    """The EUR cell of a listing: the euros so far, and ~the projected total while it runs."""
    so_far, ahead = data.get("eur_so_far"), data.get("eur_projected")
    if so_far is None:
        return "-"
    if ahead is None or data.get("status") in ("completed", "failed", "stopped", "interrupted"):
        return f"{so_far:.2f}"
    return f"{so_far:.2f} (~{ahead:.2f})"


def notes(run: Run) -> list[str]:
    """What a reader should know about the row's figures (a clock skew clamped)."""
    try:
        note = clock_note(run)
    except FinetuneError:
        return []  # beyond skew: the money's problem says it
    return [note] if note else []


def remarks(run: Run, data: dict) -> list[str]:
    """The row's problems and notes as lines under a listing: '<run>: <what>', then for a
    damaged row what removes it."""
    return [f"{run.id}: {text}" for text in [*data["problems"], *data["notes"], *removal(run)]]


def removal(run: Run) -> list[str]:
    """For a damaged row (columns read as unknown): how to remove it, else nothing."""
    if not run.damaged:
        return []
    return [f"a damaged row (changed outside finetune); if it is of no more use, remove it: "
            f"`finetune runs rm {run.id}`"]  # fmt: skip


LIST_HEADERS = ("ID", "RECIPE", "DEVICES", "STATUS", "WALL SECONDS", "BEST VAL ACC")
SPEND_HEADER = "EUR (~PROJECTED)"
# every field of a listing, in CSV's column order (JSON has these and more)
LIST_FIELDS = ("id", "recipe", "backend", "devices", "status", "created_at", "wall_seconds",
               "best_val_acc", "eur_so_far", "eur_projected")  # fmt: skip
RECIPE_WIDTH = 28  # the longest built-in recipe name; a longer one (a user's) ends in "…"


def devices(run: Run) -> str:
    """'1 cpu', '8 gpu p4d.24xlarge': the devices a run trains on."""
    return f"{run.gpus} {run.device_kind}" + (f" {run.instance_type}" if run.instance_type else "")


def list_rows(
    runs: list[Run], best: dict[str, float | None], eur: dict[str, str] | None = None
) -> list[tuple[str, ...]]:
    """The listing's rows; ``eur``: each run's EUR cell (spend_cell), shown when given. The
    headers are run_dict's keys in words (`--format json` has the same names; the EUR cell is
    eur_so_far with ~eur_projected beside it). To fit 120 columns as one table, the table
    leaves out what a row already says: the creation time is the run id's first part (UTC,
    to the second) and the backend is the instance's name (ml.* is SageMaker, any other is
    EC2, none is this machine); LIST_FIELDS, in JSON and CSV, keep both."""
    rows: list[tuple[str, ...]] = [
        (*LIST_HEADERS, SPEND_HEADER) if eur is not None else LIST_HEADERS
    ]
    for r in runs:
        acc = best.get(r.id)
        rows.append(
            (
                r.id,
                fit(r.recipe, RECIPE_WIDTH),  # whole in JSON and CSV
                devices(r),
                r.status,
                duration(r.wall_seconds),
                _pct(acc),
                *((eur.get(r.id, "-"),) if eur is not None else ()),
            )
        )
    return rows


def show_lines(run: Run, epochs: list[EpochMetrics], final: dict | None = None) -> list[str]:
    d = run.plan.get("derived", {})
    hp = run.plan.get("hyperparameters", {})
    tp = steady_throughput(epochs)
    lines = [
        f"Run {run.id}: {run.status}" + (f" ({run.exit_reason})" if run.exit_reason else ""),
        f"  recipe     {run.recipe}  (model {hp.get('model', '?')})",
        f"  dataset    {run.dataset}",
        f"  backend    {run.backend}, {run.gpus} x {run.device_kind}"
        + (f", {run.hosts} x {run.instance_type}" if run.instance_type else "")
        + (" (spot)" if run.spot else ""),
        f"  batch/lr   global batch {d.get('global_batch', '?')}, lr {d.get('lr', '?')}",
        f"  started    {_when(run.started_at)}; wall {duration(run.wall_seconds)}"
        + "".join(f" ({n})" for n in notes(run)),
    ]
    lines += [f"  problem    {p}" for p in [*run.problems, *removal(run)]]
    lines += _billing_lines(run)
    if tp:
        lines.append(
            f"  throughput {tp:,.1f} img/s steady ({tp / max(run.gpus, 1):,.1f} per device)"
        )
    for e in epochs:
        val = _pct(e.val_acc)
        lines.append(
            f"  epoch {e.epoch + 1:>3}  {e.samples_per_sec:9,.1f} img/s  "
            f"{e.epoch_seconds:7.1f} s  loss {e.train_loss:.3f}  "
            f"train {_pct(e.train_acc)}  val {val}"
        )
    lines += evaluation_lines(epochs, final or {})
    if run.record.get("git_commit") or run.record.get("dataset_manifest_sha256"):
        commit = (run.record.get("git_commit") or "not a checkout")[:12]
        data = (run.record.get("dataset_manifest_sha256") or "?")[:12]
        lines.append(
            f"  record     finetune {run.record.get('finetune')}, commit {commit}, "
            f"dataset manifest {data}"
        )
    if run.run_dir:
        lines.append(f"  files      {run.run_dir}")
    return lines


def _billing_lines(run: Run) -> list[str]:
    """What the cloud measured and charged: training, billable and interrupted time, then the
    euros (estimate.money through runs.charges, as `cost-report` computes them) line by line."""
    m, problem = _money(run)
    if m is None:
        return [f"  cost       {problem}"]
    parts = []
    if run.training_seconds is not None:
        parts.append(f"training {duration(run.training_seconds)}")
    if m.lines:
        parts.append(f"billable {duration(m.billed_seconds)}")
        saved = spot_savings(m)
        if saved is not None:
            parts.append(f"spot saving {saved:.0%}")
    if run.interrupted_seconds:
        parts.append(f"interrupted {duration(run.interrupted_seconds)}")
    lines = [f"  time       {', '.join(parts)}"] if parts else []
    if not m.lines:
        return lines
    total = "unknown (a price is missing)" if m.eur is None else f"EUR {m.eur:.2f}"
    lines.append(f"  cost       {total}; {m.rate.describe()}")
    return lines + [f"    {charge_text(line)}" for line in m.lines]


def charge_text(line) -> str:
    """One billed line: what ran, how long was billed, at what price, under which rule."""
    c = line.charge
    price = "no price" if c.usd_per_hour is None else f"USD {c.usd_per_hour:g}/h"
    source = f" ({c.price_source}{', as of ' + c.price_as_of if c.price_as_of else ''})"
    eur = "EUR ?" if line.eur is None else f"EUR {line.eur:.2f}"
    head = f"{c.label}: " if c.label else ""
    return (
        f"{head}{c.instances} x {c.instance_type} {c.market}, {duration(line.billed_seconds)} "
        f"billed each at {price}{source if c.price_source else ''}; {line.why} -> {eur}"
    )
