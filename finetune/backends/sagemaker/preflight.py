"""The pre-flight of `launch --backend sagemaker` (what --dry-run shows): the job request as
submit would send it, every offline check run on it, with the runtime --max-eur affords and
the engine's image -- all without credentials except where the dataset lives in S3."""

from __future__ import annotations

from dataclasses import replace

from finetune import settings
from finetune.aws.s3upload import as_prefix, plan_upload
from finetune.aws.session import configured_region
from finetune.backends import base
from finetune.backends.runtime import default_runtime
from finetune.backends.sagemaker import images, validate
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker import submit as sub
from finetune.catalog import instances
from finetune.plan.estimate import with_estimate

ROLE_PLACEHOLDER = "arn:aws:iam::000000000000:role/unset"  # valid shape, for the offline checks
SAMPLE_RUN_ID = "ft-YYYYMMDD-HHMMSS-xxxx"


def dry_run(plan, opts: rq.JobOptions, history=()) -> base.Preflight:
    """The job request as submit would send it, every offline check run on it; the plan
    carries its estimate (``history``: measured runs, given by the caller). Raises a
    PreflightError for what would stop the real launch."""
    engine = plan.hyperparameters.engine  # MXNet on Hopper: refused before anything else
    instances.check_engine(engine, plan.resources.instance_type)
    opts = _with_settings(opts)
    region = opts.region
    if not region:  # nothing can be priced: every missing setting, before the plan
        raise base.PreflightError([_NO_REGION, *sub.missing_settings(opts)])
    plan = with_estimate(plan, region, "sagemaker", history)
    given = opts.max_runtime
    opts = sub.with_runtime(opts, plan, region)  # the runtime the real submit would use
    image = opts.image or sub.engine_image(plan, "ACCOUNT", region)
    plan = plan.with_runtime(images.runtime(engine, image))
    bucket = opts.bucket or "FINETUNE_BUCKET"
    checked = replace(
        opts,
        bucket=bucket,
        role_arn=opts.role_arn or ROLE_PLACEHOLDER,  # no role of the user's: the run's own
        image=image.replace("ACCOUNT", "000000000000", 1) if not opts.image else image,
    )
    channels, size = _channels(plan, bucket)
    code = sub.source_dir(plan, checked, SAMPLE_RUN_ID)  # the torch engine ships our source
    toolkit = code.hyperparameters(region, plan.resources.hosts) if code else None
    entry = code.entrypoint(region) if code else None
    name = rq.job_name(SAMPLE_RUN_ID)
    req = rq.training_request(plan, SAMPLE_RUN_ID, name, channels, checked, size, toolkit, entry)
    problems = sub.missing_settings(opts) + validate.check_request(req, region)
    own_role = "finetune-run-RUN_ID: this run's own role, created at launch"
    shown = {**req, "RoleArn": opts.role_arn or own_role}
    shown["AlgorithmSpecification"] = {**req["AlgorithmSpecification"], "TrainingImage": image}
    rows = rq.summary_rows(shown, first=(("region", configured_region(region) or "not set"),))
    rows.append(("runtime cap", _runtime_note(opts, given, plan)))
    if opts.max_eur is not None:
        rows.append(("budget", f"EUR {opts.max_eur:g}: runtime capped to fit"))
    error = base.PreflightError(problems) if problems else None
    return base.Preflight(plan, rows, title="SageMaker job", error=error)


def _runtime_note(opts, given, plan) -> str:
    """Where the max runtime above comes from (the same words as the EC2 dry-run's)."""
    if given is not None:
        return "--max-runtime"
    seconds, why = default_runtime(plan)
    if opts.max_runtime is not None and opts.max_runtime < seconds:
        return f"what --max-eur {opts.max_eur:g} pays for"
    return why


_NO_REGION = base.Problem(
    "no AWS region is set for the job",
    "pass --region REGION, or set FINETUNE_REGION (or a region in your AWS config).",
)


def _with_settings(opts: rq.JobOptions) -> rq.JobOptions:
    conf = settings.get()
    return replace(
        opts,
        region=configured_region(opts.region),
        bucket=opts.bucket or conf.bucket,
        role_arn=opts.role_arn or conf.role_arn,
    )


def _channels(plan, bucket: str) -> tuple[dict[str, str], int]:
    if plan.dataset.path.startswith("s3://"):
        root = as_prefix(plan.dataset.path)
        return {c: f"{root}{c}/" for c in ("train", "validation")}, 0
    if plan.dataset.counts_only:  # not prepared yet: its prefix follows from its files
        root = f"s3://{bucket or 'BUCKET'}/finetune/datasets/{plan.dataset.name}-(once prepared)/"
        return {c: f"{root}{c}/" for c in ("train", "validation")}, 0
    upload = plan_upload(plan.dataset.path, bucket)
    return upload.channels, upload.total_bytes
