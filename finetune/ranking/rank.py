"""Rank the candidates by euros, mark the Pareto front, pick the cheapest meeting a deadline
and the fastest within a budget, and say the `finetune launch` command for each pick."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from finetune import backends
from finetune.aws.session import configured_region
from finetune.backends import launch_flags
from finetune.errors import UsageError
from finetune.estimate.planned import Estimate
from finetune.plan import build_plan
from finetune.plan.known import given_counts, note
from finetune.ranking import pareto
from finetune.ranking.candidates import DEFAULT_MAX_HOSTS, Candidate, Query, candidates
from finetune.runs.facts import measured_history
from finetune.settings.names import check_region

DEFAULT_REGION = "us-east-1"  # where nothing else names one (as `finetune sweep` prices)
# predicted times this close are a tie the cheaper row wins: the model cannot tell them apart
# (docs/decisions/061-plan-fastest-tie.md)
TIE_S = 60.0
TIE_FRACTION = 0.10


@dataclass(frozen=True)
class Row:
    """One estimated candidate; the field names are the table's headers and the JSON/CSV keys,
    in the order a reader needs them: what, how long, how much first (an 80-column terminal
    shows these in the table's first block), then where and the detail."""

    rank: int
    instance: str
    hosts: int
    gpus: int
    gpu: str
    minutes: float
    eur: float
    market: str
    backend: str
    region: str
    eur_low: float
    eur_high: float
    eur_per_epoch: float
    efficiency: float | None
    data_bound: bool
    pareto: bool
    basis: str
    explain: str = field(default="", compare=False)  # --explain's words; not a column

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k in COLUMNS}


COLUMNS = tuple(f for f in Row.__dataclass_fields__ if f != "explain")


@dataclass(frozen=True)
class Pick:
    """A chosen row, why it was chosen, and the command that launches it."""

    kind: str  # cheapest | fastest
    row: Row
    why: str
    command: str


@dataclass(frozen=True)
class PlanResult:
    """Every ranked row, the picks, what could not be estimated, and the provenance."""

    rows: list[Row]
    cheapest: Pick | None
    fastest: Pick | None
    unestimated: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: str = ""
    dataset_note: str = ""  # a dataset planned from its published counts, not its files
    provenance_short: str = ""  # the table's one-line version (the full one: --explain, JSON)
    title: str = ""  # what is planned: recipe, epochs, images


def plan_recipe(
    recipe: str,
    dataset: str | None,
    overrides: Sequence[str] = (),
    *,
    regions: Sequence[str] = (),
    backend: str | None = None,
    spot: bool | None = None,
    deadline_s: float | None = None,
    budget_eur: float | None = None,
    max_hosts: int = DEFAULT_MAX_HOSTS,
    history: Sequence | None = None,
    live_spot: bool = False,
    counts: tuple[int, int] | None = None,
) -> PlanResult:
    """Every way to run ``recipe`` on ``dataset`` (with ``overrides``), estimated, ranked by
    euros, the Pareto front marked; the cheapest within ``deadline_s`` and the fastest within
    ``budget_eur`` picked (without them: the cheapest and the fastest). ``live_spot``: spot
    rows at the backends' current spot prices (EC2's, per zone; needs credentials).
    ``counts``: (training images, classes) instead of a dataset's files."""
    if backend is not None and backend not in [name for name, _, _ in backends.priced()]:
        backends.check_name(backend)  # an unknown name: UsageError with a suggestion
        raise UsageError(
            f"the {backend} backend bills nothing, so there is nothing to plan there",
            "drop --backend to plan every cloud backend, or name one that bills: "
            + ", ".join(name for name, _, _ in backends.priced())
            + ".",
        )
    if counts is not None:
        base = build_plan(recipe, given_counts(*counts), overrides=tuple(overrides))
    else:
        base = build_plan(recipe, dataset, overrides=tuple(overrides))
    regions = tuple(check_region(r, "--region") for r in dict.fromkeys(regions)) or (
        configured_region(None) or DEFAULT_REGION,
    )
    query = Query(base.recipe, base.dataset, regions, backend, spot, max_hosts, live_spot)
    found, notes = candidates(query, measured_history() if history is None else history)
    if not found:
        raise UsageError(
            f"no instance that runs the {base.recipe.engine} engine has a price in "
            f"{', '.join(regions)}" + (f" on {backend}" if backend else ""),
            "pick a region the catalog prices (`finetune prices` lists them), or run "
            "`finetune prices refresh --region REGION` first.",
        )
    known = [c for c in found if c.estimate.known]
    unestimated = [f"{_label(c)}: {c.estimate.summary[1]}" for c in found if not c.estimate.known]
    rows = _rows(known, base.recipe.schedule.epochs)
    launch = (recipe, dataset, tuple(overrides))
    ds = base.dataset
    title = (f"{base.recipe.name}: {base.recipe.schedule.epochs} epochs x {ds.train_count:,} "
             f"images, {ds.num_classes} classes ({ds.name})")  # fmt: skip
    return PlanResult(
        dataset_note=note(ds),
        title=title,
        rows=rows,
        cheapest=pick_cheapest(rows, deadline_s, launch),
        fastest=pick_fastest(rows, budget_eur, launch),
        unestimated=unestimated,
        notes=notes,
        provenance=_provenance(known),
        provenance_short=_provenance_short(known),
    )


def _label(c: Candidate) -> str:
    return f"{c.hosts}x {c.instance_type} {c.market} ({c.backend}, {c.region})"


def _rows(found: list[Candidate], epochs: int) -> list[Row]:
    """Rows ranked by euros (then time), the Pareto front of (time, euros) marked."""
    known = sorted(((c, _known(c.estimate)) for c in found),
                   key=lambda ck: (ck[1].eur, ck[1].seconds, _label(ck[0])))  # fmt: skip
    front = pareto.front([(k.seconds, k.eur) for _, k in known])
    return [
        Row(
            rank=n + 1,
            instance=c.instance_type,
            backend=c.backend,
            region=c.region,
            market=c.market,
            hosts=c.hosts,
            gpus=c.hosts * c.gpus_per_host,
            gpu=c.gpu_model,
            minutes=k.seconds / 60.0,
            eur=k.eur,
            eur_low=k.eur_low,
            eur_high=k.eur_high,
            eur_per_epoch=k.eur / epochs,
            efficiency=c.estimate.efficiency,
            data_bound=c.estimate.data_bound,
            pareto=n in front,
            basis=_basis(c.estimate),
            explain=explain(c.estimate),
        )
        for n, (c, k) in enumerate(known)
    ]


@dataclass(frozen=True)
class _Known:
    """The time and euros of an estimate that has them (Estimate.known)."""

    seconds: float
    eur: float
    eur_low: float
    eur_high: float


def _known(est: Estimate) -> _Known:
    """``est``'s time and euros; only known estimates are ranked, and the estimator fills the
    time, the euros and their band together, so a gap here is a bug, said plainly."""
    if est.seconds is None or est.eur is None or est.eur_low is None or est.eur_high is None:
        raise ValueError(f"an estimate without its time or euros was ranked: {est.summary}")
    return _Known(est.seconds, est.eur, est.eur_low, est.eur_high)


def _basis(est: Estimate) -> str:
    kind = "measured" if est.throughput_measured else "model"
    extra = "; wider band" if est.wider_band else ""
    return f"{kind}: {est.images_per_sec:.0f} img/s (band {est.images_per_sec_low:.0f}-" \
        f"{est.images_per_sec_high:.0f}){extra}"  # fmt: skip


def explain(est: Estimate) -> str:
    """Why the throughput is what it is: the basis, and for the model what bounds the step
    (each layer class's share of its time), the stack's fitted efficiencies and the rows
    they were fitted to."""
    words = _basis(est)
    if est.throughput_measured or not est.terms:
        return f"{words}; {est.throughput_source}" if est.throughput_source else words
    total = sum(seconds for _, seconds in est.terms) or 1.0
    shares = ", ".join(f"{name} {seconds / total:.0%}" for name, seconds in est.terms)
    effs = ", ".join(f"{name} {value:.3g}" for name, value in est.efficiencies)
    rows = ", ".join(est.taught_by[:3]) + (", ..." if len(est.taught_by) > 3 else "")
    return (f"{words}; {est.bound}-bound ({shares}); stack {est.stack}: {effs}; fitted to "
            f"{len(est.taught_by)} row(s): {rows}")  # fmt: skip


def pick_cheapest(rows: list[Row], deadline_s: float | None, launch) -> Pick | None:
    """The cheapest row done within ``deadline_s`` (None: the cheapest of all)."""
    fits = [r for r in rows if deadline_s is None or r.minutes * 60 <= deadline_s]
    if not fits:
        return None
    row = min(fits, key=lambda r: (r.eur, r.minutes, r.rank))
    within = f"done within {deadline_s / 3600:g} h" if deadline_s else "of all"
    why = f"the cheapest {within}: ~{row.minutes:.1f} min for ~{row.eur:.2f} EUR"
    return Pick("cheapest", row, why, command(row, *launch))


def tie_minutes(quickest_min: float) -> float:
    """How far above the quickest predicted time a row still ties with it (see TIE_S)."""
    return max(TIE_S / 60.0, TIE_FRACTION * quickest_min)


def pick_fastest(rows: list[Row], budget_eur: float | None, launch) -> Pick | None:
    """The fastest row that costs at most ``budget_eur`` (None: the fastest of all): the
    cheapest of the rows whose time ties with the quickest (tie_minutes)."""
    fits = [r for r in rows if budget_eur is None or r.eur <= budget_eur]
    if not fits:
        return None
    quickest = min(r.minutes for r in fits)
    tied = [r for r in fits if r.minutes <= quickest + tie_minutes(quickest)]
    row = min(tied, key=lambda r: (r.eur, r.minutes, r.rank))
    within = f"within {budget_eur:g} EUR" if budget_eur is not None else "of all"
    why = f"the fastest {within}: ~{row.minutes:.1f} min for ~{row.eur:.2f} EUR"
    if row.minutes > quickest:  # a quicker row ties with it: the cheaper wins
        why += f" (ties with the quickest, {quickest:.1f} min: within {tie_minutes(quickest):.1f})"
    return Pick("fastest", row, why, command(row, *launch))


def command(row: Row, recipe: str, dataset: str | None, overrides: Sequence[str]) -> str:
    """The exact `finetune launch` command for ``row``."""
    region = launch_flags(row.backend, row.region)
    env = [a for a in region if "=" in a and not a.startswith("-")]
    args = ["finetune", "launch", recipe, *overrides]
    args += ["--dataset", dataset] if dataset else []
    args += ["--backend", row.backend, "--instance", row.instance]
    args += ["--count", str(row.hosts)] if row.hosts > 1 else []
    args += ["--spot"] if row.market == "spot" else []
    args += [a for a in region if a not in env]
    return shlex.join([*env, *args]) if not env else " ".join(env) + " " + shlex.join(args)


def _provenance_short(found: list[Candidate]) -> str:
    if not found:
        return ""
    est = found[0].estimate
    return (
        f"Estimates, not quotes: catalog prices ({est.price_age}; `finetune prices` names "
        f"sources), EUR at {est.usd_per_eur:g} USD (ECB, {est.rate_date}); spot rows include "
        "expected interruptions."
    )


def _provenance(found: list[Candidate]) -> str:
    if not found:
        return ""
    est = found[0].estimate
    return (
        f"Estimates, not quotes: prices from {est.price_source} ({est.price_age}); "
        f"EUR at {est.usd_per_eur:g} USD ({est.rate_source}, {est.rate_date}); time from "
        "finetune's performance model or your measured runs (basis column); spot rows "
        "include expected interruptions."
    )
