"""`finetune launch --instance cheapest|fastest`: the launch's instance, hosts, market and
backend picked from the same plan `finetune plan` shows, with the reason said."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from finetune.backends import launch_flags
from finetune.errors import UsageError
from finetune.ranking.rank import pick_cheapest, pick_fastest, plan_recipe

KINDS = ("cheapest", "fastest")


@dataclass(frozen=True)
class Choice:
    """What a launch uses instead of --instance cheapest|fastest, and why (for --dry-run)."""

    backend: str
    instance: str
    count: int
    spot: bool
    region: str | None  # for a backend that takes --region; None: it reads FINETUNE_REGION
    lines: tuple[str, ...]


def is_pick(instance: str | None) -> bool:
    """True when --instance names a pick (cheapest, fastest) rather than an instance type."""
    return instance is not None and instance.strip().lower() in KINDS


def check_flags(instance: str | None, deadline: str | None, budget: float | None) -> None:
    """--deadline and --budget only steer a pick: alone they would silently do nothing."""
    if (deadline or budget is not None) and not is_pick(instance):
        given = "--deadline" if deadline else "--budget"
        raise UsageError(
            f"{given} only applies with --instance cheapest or --instance fastest",
            f"add --instance cheapest (with --deadline) or --instance fastest (with --budget), "
            f"or drop {given} (--max-eur caps a run's spending).",
        )


def choose(
    kind: str,
    recipe: str,
    dataset: str | None,
    overrides: Sequence[str] = (),
    *,
    backend: str | None = None,
    spot: bool = False,
    region: str | None = None,
    deadline_s: float | None = None,
    budget_eur: float | None = None,
    history: Sequence | None = None,
) -> Choice:
    """The ``kind`` pick (cheapest within ``deadline_s``, fastest within ``budget_eur``) of
    `finetune plan` for this recipe, on the market asked for (--spot: spot; else on-demand);
    a UsageError naming the nearest miss when nothing qualifies."""
    kind = kind.strip().lower()
    result = plan_recipe(
        recipe, dataset, overrides, regions=(region,) if region else (), backend=backend,
        spot=spot, deadline_s=deadline_s, budget_eur=budget_eur, history=history,
    )  # fmt: skip
    rows = result.rows
    if region:  # a --region given is honoured only by backends that take it
        rows = [r for r in rows if launch_flags(r.backend, r.region)[0] == "--region"]
    launch = (recipe, dataset, tuple(overrides))
    if kind == "cheapest":
        pick = pick_cheapest(rows, deadline_s, launch)
    else:
        pick = pick_fastest(rows, budget_eur, launch)
    if pick is None:
        raise _none(kind, rows, deadline_s, budget_eur)
    r = pick.row
    takes_region = launch_flags(r.backend, r.region)[0] == "--region"
    return Choice(
        backend=r.backend,
        instance=r.instance,
        count=r.hosts,
        spot=r.market == "spot",
        region=r.region if takes_region else region,
        lines=(
            f"--instance {kind}: {r.hosts}x {r.instance} ({r.gpus}x {r.gpu}) {r.market} on "
            f"{r.backend} in {r.region} -- {pick.why}, of {len(rows)} candidates "
            f"({'spot' if spot else 'on-demand'} only; `finetune plan` lists them all)",
            f"  basis: {r.basis}; the same as: {pick.command}",
        ),
    )


def _none(kind, rows, deadline_s, budget_eur) -> UsageError:
    if not rows:
        return UsageError(
            "no instance has a time and euros estimate for this recipe",
            "run `finetune plan` with the same recipe to see what was left out and why.",
        )
    if kind == "cheapest":
        best = min(rows, key=lambda r: r.minutes)
        return UsageError(
            f"no instance finishes within --deadline {deadline_s / 3600:g} h: the fastest "
            f"({best.hosts}x {best.instance}) needs ~{best.minutes:.0f} min",
            "give a longer --deadline, or use --instance fastest.",
        )
    best = min(rows, key=lambda r: r.eur)
    return UsageError(
        f"no instance costs at most --budget {budget_eur:g} EUR: the cheapest "
        f"({best.hosts}x {best.instance}) costs ~{best.eur:.2f} EUR",
        f"raise --budget to {best.eur:.2f} or more, or use --instance cheapest.",
    )
