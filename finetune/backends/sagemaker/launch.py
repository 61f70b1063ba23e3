"""`launch --backend sagemaker` as library calls: resources from the catalog, the plan (also
for a dataset already in S3), its estimate, and what --dry-run shows of the job request --
all without credentials except where the dataset itself lives in S3."""

from __future__ import annotations

from dataclasses import replace

from finetune.backends.sagemaker import preflight
from finetune.backends.sagemaker import request as rq
from finetune.errors import FinetuneError, UsageError

ROLE_PLACEHOLDER = "arn:aws:iam::000000000000:role/unset"  # valid shape, for the offline checks
SAMPLE_RUN_ID = "ft-YYYYMMDD-HHMMSS-xxxx"


def resources(instance: str | None, count: int, spot: bool):
    """Every GPU of ``count`` instances of ``instance``: hosts = count, so the learning rate
    scales with the total GPU count."""
    from finetune.catalog import instances
    from finetune.plan import Resources

    if not instance:
        raise UsageError(
            "--backend sagemaker needs an instance type",
            "pass --instance TYPE, e.g. --instance p3.8xlarge (`finetune prices` lists them).",
        )
    inst = instances.get(instance)
    if inst.gpu_count < 1:
        raise UsageError(f"{inst.name} has no GPU", "pick a GPU instance type.")
    return Resources.create(
        backend="sagemaker",
        instance_type=inst.name,
        hosts=count,
        devices_per_host=inst.gpu_count,
        device="gpu",
        spot=spot,
    )


def build_plan(recipe, dataset: str | None, res, overrides, region: str | None = None):
    """The plan, with a cost estimate when the region is known. ``dataset`` may be a prepared
    folder or the s3:// prefix finetune uploaded it to (its manifest is read from there)."""
    from finetune import plan as pl

    if dataset and dataset.startswith("s3://"):
        plan = _plan_for_s3(recipe, dataset, res, overrides, region)
    else:
        plan = pl.build_plan(recipe, dataset, res, overrides)
    return with_estimate(plan, region)


def with_estimate(plan, region: str | None, backend: str = "sagemaker", history=None):
    """The plan with report.estimate's figures for ``backend`` (sagemaker: ml.* prices, ec2:
    EC2 prices); unchanged where no region is known. ``history``: measured runs (default:
    the ledger's), which replace the reference throughput when they match."""
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
            backend=backend,
            use_spot=res.spot,
            history=measured_history() if history is None else history,
        )
    except FinetuneError as exc:
        return plan.with_estimate({"summary": f"no estimate: {exc.what}"})
    return plan.with_estimate(estimate)


def _plan_for_s3(recipe, uri: str, res, overrides, region):
    """Plan from the manifest stored under an uploaded dataset prefix."""
    from finetune import plan as pl
    from finetune.aws import s3dataset

    return pl.build_plan(recipe, s3dataset.summarize(uri, region), res, overrides)


def dry_run_lines(plan, opts: rq.JobOptions, region: str | None) -> list[str]:
    """The job request as `launch` would send it, with the unknowns named; raises a
    PreflightError for problems that would stop the launch whatever the settings."""
    from finetune import __version__, settings

    conf = settings.get()
    opts = replace(
        opts,
        region=region,
        bucket=opts.bucket or conf.bucket,
        role_arn=opts.role_arn or conf.role_arn,
    )
    image = opts.image or rq.default_image("ACCOUNT", region or "REGION", __version__)
    checked = replace(
        opts,
        bucket=opts.bucket or "FINETUNE_BUCKET",
        role_arn=opts.role_arn or ROLE_PLACEHOLDER,
        image=image if opts.image else image.replace("ACCOUNT", "000000000000"),
    )
    channels, size = _channels(plan, checked.bucket)
    name = rq.job_name(SAMPLE_RUN_ID)
    req = rq.training_request(plan, SAMPLE_RUN_ID, name, channels, checked, size)
    preflight.raise_if(preflight.check_request(req, region))
    shown = {**req, "RoleArn": opts.role_arn or "(not set: FINETUNE_ROLE_ARN)"}
    shown["AlgorithmSpecification"] = {**req["AlgorithmSpecification"], "TrainingImage": image}
    lines = rq.summary_lines(shown, first=(("region", region or "(not set)"),))
    missing = [
        v
        for v, ok in (("FINETUNE_BUCKET", opts.bucket), ("FINETUNE_ROLE_ARN", opts.role_arn))
        if not ok
    ]
    if not region:
        missing.append("a region (--region or FINETUNE_REGION)")
    if missing:
        lines.append(f"not set: {', '.join(missing)} -- see `finetune infra deploy`")
    return lines


def _channels(plan, bucket: str) -> tuple[dict[str, str], int]:
    from finetune.aws.s3upload import as_prefix, plan_upload

    if plan.dataset.path.startswith("s3://"):
        root = as_prefix(plan.dataset.path)
        return {c: f"{root}{c}/" for c in ("train", "validation")}, 0
    upload = plan_upload(plan.dataset.path, bucket)
    return upload.channels, upload.total_bytes
