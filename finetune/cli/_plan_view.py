"""What `launch --dry-run` shows of a Plan: one (label, value) row per fact. (Plan knows
nothing of this module: the summary reads the plan, never the other way round.)"""

from __future__ import annotations

import re
import shutil
import textwrap
from typing import TYPE_CHECKING

from finetune.plan.known import note
from finetune.recipes.features import summary
from finetune.report.text import duration as format_duration

if TYPE_CHECKING:
    from finetune.plan import Plan
    from finetune.recipes.schema import Recipe


def summary_lines(plan: Plan, width: int | None = None, verbose: bool = False) -> list[str]:
    """What ``launch --dry-run`` prints: one aligned ``label  value`` line (or more) per fact;
    ``verbose``: the estimate's whole basis instead of its few lines."""
    return aligned(summary_rows(plan, verbose), width)


def warnings(plan: Plan) -> list[str]:
    """What to read before anything else (a retired instance, and what to use instead)."""
    return list(plan.estimate.warnings) if plan.estimate is not None else []


def aligned(rows: list[tuple[str, str]], width: int | None = None) -> list[str]:
    """(label, value) rows as ``label  value`` lines, the values in one column, wrapped at
    spaces to ``width`` columns (default: the terminal's; COLUMNS wins); a path longer than
    a line stays whole, so it can be copied."""
    pad = max((len(label) for label, _ in rows), default=0) + 2
    room = max((width or shutil.get_terminal_size((80, 24)).columns) - pad, 20)
    out = []
    for label, value in rows:
        parts = textwrap.wrap(value, room, break_long_words=False, break_on_hyphens=False)
        parts = parts or [""]
        out.append(f"{label:<{pad}}{parts[0]}".rstrip())
        out += [" " * pad + part for part in parts[1:]]
    return out


def summary_rows(plan: Plan, verbose: bool = False) -> list[tuple[str, str]]:
    """(label, value) rows describing ``plan``, for people."""
    r, ds, res, der = plan.recipe, plan.dataset, plan.resources, plan.derived
    where = (res.backend or "default backend") + (
        f" {res.instance_type}" if res.instance_type else ""
    )
    where += " (spot)" if res.spot else ""
    rows = [
        ("recipe", r.name + (f" with {' '.join(plan.overrides)}" if plan.overrides else "")),
        ("model", f"{r.model.name} ({plan.weights_from or _weights(r)})"),
        ("dataset", _dataset(ds)),
        ("classes", f"{ds.num_classes} ({_split_counts(ds)})"),
        ("resources", f"{where}: {res.hosts} host(s) x {res.devices_per_host} {res.device}"),
        ("batch", f"{r.train.batch_per_device} per device -> {der.global_batch} global"),
        ("lr", f"{r.optimizer.lr_per_device:g} per device -> {der.lr:g} (x{der.devices} devices)"),
        ("warmup", _warmup(plan)),
        ("schedule", _schedule(r)),
        ("epochs", f"{r.schedule.epochs} x {der.steps_per_epoch} steps/epoch"),
        ("checkpoints", _checkpoints(plan)),
        (
            "optimizer",
            f"{r.optimizer.name} momentum {r.optimizer.momentum:g} "
            f"wd {r.optimizer.wd:g}, {r.data.image_size} px, {r.data.augmentation}",
        ),
        ("preprocessing", _preprocessing(plan)),
    ]
    if summary(r):
        rows.append(("features", summary(r)))
    estimate = _estimate_rows(plan.estimate) if verbose else _short_estimate(plan.estimate)
    return rows + _runtime_rows(plan.runtime) + estimate


def _runtime_rows(runtime: dict[str, str] | None) -> list[tuple[str, str]]:
    """What runs the engine (image or AMI) and what that needs."""
    if not runtime:
        return []
    where = runtime.get("image") or runtime.get("ami") or ""
    rows = [("runtime", f"{runtime.get('engine', '')} on {where}".strip())]
    return [*rows, ("needs", runtime["needs"])] if runtime.get("needs") else rows


def _checkpoints(plan: Plan) -> str:
    every = plan.hyperparameters.checkpoint_interval_s
    text = f"every {every:g} s and at each epoch's end"
    res = plan.resources
    capped = res.checkpoint_max_s is not None and every < plan.recipe.train.checkpoint_interval_s
    if capped and res.checkpoint_note:
        text += f" ({res.checkpoint_note})"
    return text


def _preprocessing(plan: Plan) -> str:
    """The validation transform the run (and predict, export) applies."""
    hp = plan.hyperparameters
    resize = hp.resize_shorter or round(hp.image_size / 0.875)
    mean = "/".join(f"{m:g}" for m in hp.mean)
    std = "/".join(f"{s:g}" for s in hp.std)
    return (
        f"shorter side {resize} px ({hp.interpolation}), centre {hp.image_size} px, "
        f"mean {mean}, std {std}"
    )


def _weights(r: Recipe) -> str:
    if not r.model.pretrained:
        return "random init"
    return f"pretrained: {r.model.weights}" if r.model.weights else "pretrained"


def _warmup(plan: Plan) -> str:
    der = plan.derived
    if not der.warmup_steps:
        return "none"
    begin = min(plan.recipe.optimizer.lr_per_device, der.lr)
    return f"{der.warmup_epochs:g} epoch(s) = {der.warmup_steps} steps, {begin:g} -> {der.lr:g}"


def _schedule(r: Recipe) -> str:
    s = r.schedule
    if s.kind == "step" and s.steps:
        return f"step: x{s.factor:g} at epoch(s) {', '.join(f'{e:g}' for e in s.steps)}"
    return {"cosine": "cosine to 0", "step": "constant (no steps)"}.get(s.kind, s.kind)


def _estimate_rows(estimate) -> list[tuple[str, str]]:
    """The estimate's summary lines (estimate.planned.Estimate), the first one labelled."""
    if estimate is None:
        return []
    return [("estimate" if i == 0 else "", line) for i, line in enumerate(estimate.summary)]


def _dataset(ds) -> str:
    return note(ds) if ds.counts_only else f"{ds.name} at {ds.path}"


def _short_estimate(est) -> list[tuple[str, str]]:
    """The estimate in a few lines: time and euros with their band, the basis and the price
    in plain words (``--verbose``: every figure and source)."""
    if est is None:
        return []
    if not est.known:  # no estimate: its summary says why (one or two lines)
        return [("estimate" if i == 0 else "", line) for i, line in enumerate(est.summary)]
    time = "~" + format_duration(est.seconds) if est.seconds is not None else "time unknown"
    band = ""
    if (
        est.seconds_low is not None
        and est.seconds_high is not None
        and (round(est.seconds_low) != round(est.seconds_high))
    ):
        low, high = format_duration(est.seconds_low), format_duration(est.seconds_high)
        band = f" (likely {low} to {high}, {est.eur_low:.2f} to {est.eur_high:.2f} EUR)"
    basis = "your own measured runs" if est.throughput_measured else "finetune's performance model"
    # the first summary line is "13.69 EUR/h for 4x V100[ (spot, ...)]"
    found = re.search(r" for (\d+x \S+)", est.summary[0]) if est.summary else None
    gpus = found[1] if found else f"{est.gpus}x GPU"
    pace = (f"at {est.images_per_sec:,.0f} images/s on {gpus} by {basis}; "
            if est.images_per_sec is not None else "")  # fmt: skip
    pace += "the CPUs' decoding sets the pace; " if est.data_bound else ""
    price = f"{est.eur_per_hour:.2f} EUR/h" if est.eur_per_hour is not None else "hourly price"
    price += " (estimated price)" if est.price_is_estimate else ""
    if est.interruption_seconds and est.interruption_seconds >= 1:
        price += f"; spot: {format_duration(est.interruption_seconds)} of expected interruptions"
    return [
        ("estimate", f"{time}, ~{est.eur:.2f} EUR{band}"),
        ("", f"{pace}{price} (--verbose: every figure and source)"),
    ]


def _split_counts(ds) -> str:
    counts = f"{ds.train_count} train / {ds.val_count} val"
    if ds.test_count:
        counts += f" / {ds.test_count} held-out test"
    return counts + " images"
