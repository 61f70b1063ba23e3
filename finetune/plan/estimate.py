"""A cloud plan's cost estimate: estimate.estimator's figures for one price book and region.

``estimate_for`` is the one place a plan's recipe, dataset and resources become the
estimator's arguments: launch --dry-run (through ``with_estimate``), sweep and `finetune plan`
all call it, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable

from finetune.catalog.fx import Rate
from finetune.catalog.spot import SpotPrice
from finetune.engines import registry
from finetune.errors import FinetuneError, UsageError
from finetune.estimate.estimator import estimate
from finetune.estimate.planned import Estimate
from finetune.estimate.request import EstimateRequest, Workload
from finetune.estimate.run_history import Measurement
from finetune.plan.plan import DatasetSummary, Plan, Resources
from finetune.recipes.schema import Recipe


def estimate_for(
    recipe: Recipe,
    dataset: DatasetSummary,
    resources: Resources,
    region: str,
    price_book: str,
    history: Iterable[Measurement],
    rate: Rate | None = None,
    spot_quote: SpotPrice | None = None,
) -> Estimate:
    """estimate.estimator's Estimate for ``recipe`` on ``dataset`` with ``resources`` at
    ``price_book``'s prices in ``region`` (``history``: measured runs; ``rate``: the EUR rate,
    default today's; ``spot_quote``: a current spot price to use). Raises the catalog's
    errors for an unknown instance or price."""
    if resources.instance_type is None:
        raise UsageError(f"no instance type to price on {price_book}",
                         "name one with --instance.")  # fmt: skip
    work = Workload(
        model=recipe.model.name,
        engine=registry.get(recipe.engine),  # resolved here, once: the estimate asks the spec
        precision=recipe.train.precision,
        batch_per_device=recipe.train.batch_per_device,
        image_size=recipe.data.image_size,
        compile=recipe.train.compile,
    )
    request = EstimateRequest(
        work=work,
        instance_type=resources.instance_type,
        region=region,
        images_per_epoch=dataset.train_count,
        epochs=recipe.schedule.epochs,
        hosts=resources.hosts,
        price_book=price_book,
        spot=resources.spot,
        other_images=dataset.val_count + dataset.test_count,
        checkpoint_interval_s=recipe.train.checkpoint_interval_s,
    )
    return estimate(request, history, rate, spot_quote)


def with_estimate(
    plan: Plan, region: str | None, price_book: str, history: Iterable[Measurement]
) -> Plan:
    """The plan with the estimate at ``price_book``'s prices (the catalog's ec2 or
    sagemaker prices) in ``region``; unchanged where no region is known. ``history``:
    measured runs, read from the ledger by the caller (service/, never a backend), which
    replace the performance model when one matches the cell (network, GPU, engine, batch,
    image size; the estimate then says so)."""
    if not region:
        return plan
    try:
        estimate = estimate_for(
            plan.recipe, plan.dataset, plan.resources, region, price_book, history
        )
    except FinetuneError as exc:
        return plan.with_estimate(Estimate.unavailable(exc.what))
    return plan.with_estimate(estimate)
