"""A cloud plan's cost estimate: report.estimate's figures for one price book and region."""

from __future__ import annotations

from finetune.errors import FinetuneError


def with_estimate(plan, region: str | None, price_book: str):
    """The plan with the estimate at ``price_book``'s prices (the catalog's ec2 or
    sagemaker prices) in ``region``; unchanged where no region is known."""
    if not region:
        return plan
    from finetune.report.estimate import estimate_run

    res = plan.resources
    try:
        estimate = estimate_run(
            model=plan.recipe.model.name,
            instance_type=res.instance_type,
            region=region,
            images_per_epoch=plan.dataset.train_count,
            epochs=plan.recipe.schedule.epochs,
            instance_count=res.hosts,
            backend=price_book,
            use_spot=res.spot,
        )
    except FinetuneError as exc:
        return plan.with_estimate({"summary": f"no estimate: {exc.what}"})
    return plan.with_estimate(estimate)
