"""Every way to run one recipe on the cloud, each estimated by the one estimator.

A candidate is an instance type x hosts x region x market (on-demand, spot) x backend. Only
backends billed by a cloud price book take part (backends.priced), each as far as its declared
capabilities reach (several hosts, spot); only instance types whose GPUs run the recipe's
engine (catalog.engines); only hosts whose global batch fits the training images (the plan's
own derive). A candidate the catalog has no price or no throughput for is kept aside with why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from finetune import backends
from finetune.backends.base import Feature
from finetune.catalog import fx, instances, prices
from finetune.errors import ConfigError, FinetuneError
from finetune.estimate.planned import Estimate
from finetune.plan import DatasetSummary, Resources, derive
from finetune.plan.estimate import estimate_for
from finetune.recipes.schema import Recipe

DEFAULT_MAX_HOSTS = 4  # instances of one run to consider; --max-hosts changes it


@dataclass(frozen=True)
class Query:
    """What `finetune plan` is asked."""

    recipe: Recipe  # overrides applied
    dataset: DatasetSummary
    regions: tuple[str, ...]
    backend: str | None = None  # None: every priced backend
    spot: bool | None = None  # None: both markets; True: spot only; False: on-demand only
    max_hosts: int = DEFAULT_MAX_HOSTS
    live_spot: bool = False  # ask the backends for current spot prices (needs credentials)


@dataclass(frozen=True)
class Candidate:
    """One way to run the recipe, and its estimate (estimate.planned.Estimate)."""

    backend: str
    instance_type: str
    gpu_model: str
    gpus_per_host: int
    hosts: int
    region: str
    spot: bool
    estimate: Estimate

    @property
    def market(self) -> str:
        return "spot" if self.spot else "on-demand"


def candidates(query: Query, history: Sequence = ()) -> tuple[list[Candidate], list[str]]:
    """(every runnable candidate with its estimate, notes on what was left out and why)."""
    rate = fx.eur_rate()  # read once: every candidate is billed at the same dated rate
    book = prices.load()
    engine = query.recipe.engine
    out: list[Candidate] = []
    notes: set[str] = set()
    for name, price_book, caps in backends.priced():
        if query.backend not in (None, name):
            continue
        markets = [m for m in (False, True) if query.spot in (None, m)]
        if not caps.supports(Feature.SPOT):
            markets = [m for m in markets if not m]
        hosts = range(1, query.max_hosts + 1) if caps.supports(Feature.MULTI_NODE) else (1,)
        runnable = [i for i in instances.all_instances().values() if engine in i.engines]
        notes.update(f"{i.gpu_model}: the {engine} engine cannot run there"
                     for i in instances.all_instances().values() if i not in runnable)  # fmt: skip
        live = _live(query, name, runnable) if True in markets else {}
        for inst in runnable:
            for region in query.regions:
                try:
                    book.quote(inst.name, region, price_book)
                except FinetuneError:
                    notes.add(f"{inst.name} ({name}, {region}): no price in the catalog")
                    continue
                for h in hosts:
                    res = _resources(query, name, inst, h)
                    if res is None:
                        continue
                    for spot in markets:
                        res = res.model_copy(update={"spot": spot})
                        quote = live.get((region, inst.name)) if spot else None
                        out.append(_estimated(query, name, price_book, inst, res, region,
                                              history, rate, quote))  # fmt: skip
    return out, sorted(notes)


def _live(query: Query, backend: str, runnable: list) -> dict:
    """{(region, instance type): current spot price} from ``backend`` when asked for
    (--live-spot): one request per region, through the backend (it owns the cloud calls)."""
    if not query.live_spot:
        return {}
    names = sorted(i.name for i in runnable)
    return {
        (region, itype): quote
        for region in query.regions
        for itype, quote in backends.live_spot_prices(backend, names, region).items()
    }


def _resources(query: Query, backend: str, inst, hosts: int):
    """Plan resources for ``hosts`` x ``inst``; None where the global batch would exceed the
    training images (the plan refuses that launch, so it is no candidate)."""
    res = Resources(
        backend=backend,
        instance_type=inst.name,
        hosts=hosts,
        devices_per_host=inst.gpu_count,
        device="gpu",
    )
    try:
        derive(query.recipe, query.dataset, res)
    except ConfigError:
        return None
    return res


def _estimated(query, backend, price_book, inst, res, region, history, rate, quote) -> Candidate:
    est = estimate_for(query.recipe, query.dataset, res, region, price_book, history, rate, quote)
    return Candidate(
        backend=backend,
        instance_type=inst.name,
        gpu_model=inst.gpu_model,
        gpus_per_host=inst.gpu_count,
        hosts=res.hosts,
        region=region,
        spot=res.spot,
        estimate=est,
    )
