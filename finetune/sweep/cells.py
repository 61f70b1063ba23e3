"""A sweep's plan: every cell's Plan (batch and learning rate derived by the linear scaling
rule, recipes/lr_scaling.py) and euro estimate (estimate.estimator, learning from the ledger), the
total, and the --max-eur refusal -- all before anything runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from finetune.backends import get_backend, instance_resources, on_this_machine
from finetune.backends.base import ResourceRequest
from finetune.errors import UsageError
from finetune.plan import Plan, build_plan
from finetune.plan.estimate import with_estimate
from finetune.recipes.loading import load_recipe
from finetune.runs.facts import measured_history
from finetune.settings.names import check_region
from finetune.sweep import grid as g
from finetune.units.eurocap import check_max_eur


@dataclass(frozen=True)
class PlannedCell:
    """One cell, planned: its grid values and identity, the Plan, and the estimate."""

    cell: g.Cell
    plan: Plan
    eur: float | None  # None: no estimate (no throughput figure or no price)
    note: str  # the estimate's first line, or why there is none

    @property
    def engine(self) -> str:
        return self.plan.recipe.engine


@dataclass
class SweepPlan:
    """What `finetune sweep` will run: id, backend, cells and the total estimate."""

    sweep_id: str
    recipe: str
    backend: str
    cells: list[PlannedCell] = field(default_factory=list)

    @property
    def total_eur(self) -> float | None:
        """The sum of the estimates; None when any cell has none."""
        eurs = [c.eur for c in self.cells]
        return None if None in eurs else sum(e for e in eurs if e is not None)

    def check_budget(self, max_eur: float | None) -> None:
        """UsageError when the total estimate exceeds ``max_eur`` (or cannot be known), or
        when ``max_eur`` is no usable cap (zero, negative: finetune.units.eurocap)."""
        cap = check_max_eur(max_eur)
        if cap is None:
            return
        total = self.total_eur
        if total is None:
            missing = [c.cell.label() for c in self.cells if c.eur is None]
            raise UsageError(
                f"--max-eur {max_eur:g} cannot be checked: no estimate for {len(missing)} "
                f"cell(s) ({'; '.join(missing[:3])}).",
                "run one cell of that GPU model first (estimates learn from the ledger), "
                "or drop --max-eur.",
            )
        if total > cap:
            raise UsageError(
                f"The sweep's {len(self.cells)} runs are estimated at {total:.2f} EUR, more "
                f"than --max-eur {max_eur:g}.",
                "drop grid values (the dearest cells first), or raise --max-eur.",
            )


def plan_sweep(
    recipe: str,
    dataset: str | None,
    backend: str,
    grid_specs: list[str],
    *,
    overrides=(),
    instance: str | None = None,
    region: str | None = None,
    spot: bool = False,
) -> SweepPlan:
    """Expand the grid and plan every cell (UsageError/ConfigError for a bad cell, before
    anything runs)."""
    if region:  # priced per cell: a typo must not price every cell as "no price"
        check_region(region, "--region")
    grid = g.parse_grid(grid_specs)
    local = on_this_machine(backend)
    _check_keys(grid, local, instance)
    cells: list[PlannedCell] = []
    sweep_id = ""
    history = None if local else measured_history()
    for values in g.expand(grid) or [()]:
        plan = _cell_plan(recipe, dataset, backend, values, overrides, instance, spot, local)
        if not sweep_id:
            sweep_id = g.sweep_id(
                recipe, plan.dataset.manifest_sha256, backend, grid, [*overrides, instance or ""]
            )
        key = g.cell_key(
            plan.recipe.name, plan.dataset.manifest_sha256, plan.recipe.engine, backend, values
        )
        plan, eur, note = _estimate(plan, backend, region, history)
        cells.append(PlannedCell(g.Cell(tuple(values), key), plan, eur, note))
    return SweepPlan(sweep_id, cells[0].plan.recipe.name, backend, cells)


def _check_keys(grid, local: bool, instance: str | None) -> None:
    if local and "instance" in grid:
        raise UsageError(
            "--grid instance=... needs a cloud backend: the local backend runs on this machine",
            "add --backend ec2 or --backend sagemaker, or sweep cpus=1,2 locally.",
        )
    if not local and "cpus" in grid:
        raise UsageError(
            "--grid cpus=... is for the local backend", "sweep instance=... on the cloud."
        )
    if not local and "instance" not in grid and not instance:
        raise UsageError(
            "a cloud sweep needs instance types",
            "add --grid instance=g5.xlarge,g5.12xlarge (or --instance TYPE).",
        )


def _count(cell: dict, key: str) -> int | None:
    if key not in cell:
        return None
    try:
        value = int(cell[key])
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"--grid {key}={cell[key]} is not a positive whole number", "fix it.")
    return value


def _cell_plan(recipe, dataset, backend, values, overrides, instance, spot, local):
    base = load_recipe(recipe, overrides)
    cell = dict(values)
    if local:
        resources = _local_resources(backend, _count(cell, "cpus"))
    else:
        count = _count(cell, "count") or 1
        resources = instance_resources(backend, cell.get("instance", instance), count, spot)
    extra = g.recipe_overrides(values, base.engine, base.model.name)
    return build_plan(recipe, dataset, resources, [*overrides, *extra])


def _estimate(plan, backend: str, region: str | None, history):
    """(the plan with its estimate, euros, a short note): nothing to pay on this machine
    (``history`` None), else estimate.estimator's figures, learning from ``history``."""
    if history is None:
        return plan, 0.0, "this machine: no charge"
    plan = with_estimate(plan, region or "us-east-1", backend, history)
    est = plan.estimate
    lines = (est.summary if est is not None else ()) or ("no estimate",)
    return plan, est.eur if est is not None else None, "; ".join(lines[:2])


# the words of as_dict's cell keys (`sweep --format json` has the same names)
HEADERS = ["cell", "engine", "resources", "devices", "global batch", "lr", "EUR", "note"]


def table_rows(sp: SweepPlan) -> list[list[str]]:
    """One row per cell for people: grid values, derived batch and learning rate (linear
    scaling rule), and the estimate with where it came from."""
    rows = []
    for c in sp.cells:
        d = c.plan.derived
        rows.append(
            [c.cell.label() or "(recipe as is)", c.engine, _where(c), str(d.devices),
             str(d.global_batch), f"{d.lr:g}", "-" if c.eur is None else f"{c.eur:.2f}", c.note]
        )  # fmt: skip
    return rows


def _where(c: PlannedCell) -> str:
    r = c.plan.resources
    return f"{r.hosts}x {r.instance_type}" if r.instance_type else f"this machine ({r.device})"


def as_dict(sp: SweepPlan) -> dict:
    """The sweep plan as JSON-ready data (each cell's derived values and estimate)."""
    return {
        "sweep_id": sp.sweep_id,
        "recipe": sp.recipe,
        "backend": sp.backend,
        "total_eur": sp.total_eur,
        "cells": [
            {
                "cell": c.cell.key,
                "values": dict(c.cell.values),
                "engine": c.engine,
                "resources": _where(c),
                "instance_type": c.plan.resources.instance_type,
                "devices": c.plan.derived.devices,
                "global_batch": c.plan.derived.global_batch,
                "lr": c.plan.derived.lr,
                "eur": c.eur,
                "estimate": c.plan.estimate.model_dump(mode="json") if c.plan.estimate else None,
                "note": c.note,
            }
            for c in sp.cells
        ],
    }


def _local_resources(backend: str, cpus: int | None):
    """This machine's resources as the local backend gives them (``cpus``: that many CPU
    devices, else its default: every GPU, or the CPU)."""
    return get_backend(backend, options={"cpus": cpus}).resources(ResourceRequest())
