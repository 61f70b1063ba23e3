"""A cloud plan's cost estimate: report.estimate's figures for one price book and region."""

from __future__ import annotations

from finetune.errors import FinetuneError


def with_estimate(plan, region: str | None, price_book: str, history=None):
    """The plan with the estimate at ``price_book``'s prices (the catalog's ec2 or
    sagemaker prices) in ``region``; unchanged where no region is known. ``history``:
    measured runs (default: the ledger's), which replace the performance model when one
    matches the cell (network, GPU, engine, batch, image size; the estimate then says so)."""
    if not region:
        return plan
    from finetune.report.estimate import Workload, estimate_run
    from finetune.report.planned import Estimate
    from finetune.runs.facts import measured_history

    res, recipe, ds = plan.resources, plan.recipe, plan.dataset
    work = Workload(
        model=recipe.model.name,
        engine=recipe.engine,
        precision=recipe.train.precision,
        batch_per_device=recipe.train.batch_per_gpu,
        image_size=recipe.data.image_size,
    )
    try:
        estimate = estimate_run(
            model=recipe.model.name,
            instance_type=res.instance_type,
            region=region,
            images_per_epoch=ds.train_count,
            epochs=recipe.schedule.epochs,
            instance_count=res.hosts,
            backend=price_book,
            use_spot=res.spot,
            history=measured_history() if history is None else history,
            work=work,
            other_images=ds.val_count + ds.test_count,
        )
    except FinetuneError as exc:
        return plan.with_estimate(Estimate.unavailable(exc.what))
    return plan.with_estimate(estimate)
