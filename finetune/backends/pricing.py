"""A cloud plan's cost estimate: report.estimate's figures for one price book and region."""

from __future__ import annotations

from finetune.errors import FinetuneError


def with_estimate(plan, region: str | None, price_book: str, history=None):
    """The plan with the estimate at ``price_book``'s prices (the catalog's ec2 or
    sagemaker prices) in ``region``; unchanged where no region is known. ``history``:
    measured runs (default: the ledger's), which replace the reference throughput when one
    matches the model and GPU (the estimate then says so)."""
    if not region:
        return plan
    from finetune.report.estimate import estimate_run
    from finetune.runs.facts import measured_history

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
            history=measured_history() if history is None else history,
        )
    except FinetuneError as exc:
        return plan.with_estimate({"summary": f"no estimate: {exc.what}"})
    return plan.with_estimate(estimate)
