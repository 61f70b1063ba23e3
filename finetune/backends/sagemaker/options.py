"""`launch --backend sagemaker` as library calls: the options model (the launch flags this
backend takes), resources from the catalog, a dataset already in S3, and the pre-flight that
--dry-run shows: the job request as submit would send it, with the runtime --max-eur affords
and the engine's image -- all without credentials except where the dataset lives in S3."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from finetune import settings
from finetune.aws.s3upload import as_prefix, plan_upload
from finetune.aws.session import configured_region
from finetune.backends import base, s3dataset
from finetune.backends.runtime import default_runtime
from finetune.backends.sagemaker import images, preflight
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker import submit as sub
from finetune.catalog import instances
from finetune.errors import UsageError
from finetune.plan import Resources
from finetune.plan.estimate import with_estimate
from finetune.settings.names import Region
from finetune.units.durations import Duration
from finetune.units.eurocap import EuroCap

ROLE_PLACEHOLDER = "arn:aws:iam::000000000000:role/unset"  # valid shape, for the offline checks
SAMPLE_RUN_ID = "ft-YYYYMMDD-HHMMSS-xxxx"


class SageMakerOptions(base.Options):
    """The SageMaker backend's launch flags (settings fill the rest at submit time)."""

    region: Region = None
    max_runtime: Duration | None = Field(None, gt=0)
    max_wait: Duration | None = Field(None, gt=0)  # spot only; default twice the runtime
    max_eur: EuroCap = None
    image: str | None = None
    subnet: tuple[str, ...] = ()
    security_group: tuple[str, ...] = ()
    kms_key: str | None = None
    read_prefix: tuple[str, ...] = ()  # s3:// prefixes the run may read besides its dataset

    def job_options(self) -> rq.JobOptions:
        """The options as stored with the run (options.json), so a resume starts the same."""
        return rq.JobOptions(**self.model_dump())  # the same names: nothing renamed


# AWS's PyTorch training image starts the toolkit from a bash PID 1 without exec
# (ENTRYPOINT ["bash", "-m", "start_with_right_hostname.sh"], which runs `train` as a job of
# its own), and the toolkit (sagemaker-training 5.1.4) neither handles nor forwards signals:
# the SIGTERM of a stop or a spot interruption most likely never reaches the trainer, which is
# SIGKILLed. What survives is the last periodic checkpoint (SageMaker syncs /opt/ml/checkpoints
# to S3 as it is written), so a spot job checkpoints at least every 5 minutes: at most that
# much work lost per interruption (2.5 on average), for a checkpoint write of about a second
# (ResNet-152: ~0.5 GB of weights and momentum). Read from aws/deep-learning-containers
# pytorch/training/docker/2.10/py3/cu130/Dockerfile.gpu (commit 0bffd28) and
# pytorch/training/docker/build_artifacts/start_with_right_hostname.sh (commit eed9365).
SPOT_CHECKPOINTS = {
    "checkpoint_max_s": 300.0,
    "checkpoint_note": "at most 300 s on SageMaker spot: a stop's SIGTERM may never reach the "
    "trainer in AWS's image",
}


def resources(request: base.ResourceRequest, opts: rq.JobOptions):
    """Every GPU of ``count`` instances of ``instance``: hosts = count, so the learning rate
    scales with the total GPU count."""
    if not request.instance:
        raise UsageError(
            "--backend sagemaker needs an instance type",
            "pass --instance TYPE, e.g. --instance p3.8xlarge (`finetune prices` lists them).",
        )
    if opts.max_wait and not request.spot:
        raise UsageError("--max-wait applies to spot jobs only", "add --spot, or drop --max-wait.")
    inst = instances.get(request.instance)
    if inst.gpu_count < 1:
        raise UsageError(f"{inst.name} has no GPU", "pick a GPU instance type.")
    return Resources.create(
        backend="sagemaker",
        instance_type=inst.name,
        hosts=request.count,
        devices_per_host=inst.gpu_count,
        device="gpu",
        spot=request.spot,
        **(SPOT_CHECKPOINTS if request.spot else {}),
    )


def dataset_summary(uri: str, opts: rq.JobOptions):
    """The summary of a dataset finetune uploaded to ``uri`` (its manifest is read there)."""
    return s3dataset.summarize(uri, configured_region(opts.region))


def check(plan, opts: rq.JobOptions, history=()) -> base.Preflight:
    """The job request as submit would send it, every offline check run on it; the plan
    carries its estimate (``history``: measured runs, given by the caller). Raises a
    PreflightError for what would stop the real launch."""
    engine = plan.hyperparameters.engine  # MXNet on Hopper: refused before anything else
    instances.check_engine(engine, plan.resources.instance_type)
    opts = _with_settings(opts)
    region = opts.region
    if not region:  # nothing can be priced: every missing setting, before the plan
        raise preflight.PreflightError([_NO_REGION, *sub.missing_settings(opts)])
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
    problems = sub.missing_settings(opts) + preflight.check_request(req, region)
    own_role = "finetune-run-RUN_ID: this run's own role, created at launch"
    shown = {**req, "RoleArn": opts.role_arn or own_role}
    shown["AlgorithmSpecification"] = {**req["AlgorithmSpecification"], "TrainingImage": image}
    rows = rq.summary_rows(shown, first=(("region", configured_region(region) or "not set"),))
    rows.append(("runtime cap", _runtime_note(opts, given, plan)))
    if opts.max_eur is not None:
        rows.append(("budget", f"EUR {opts.max_eur:g}: runtime capped to fit"))
    error = preflight.PreflightError(problems) if problems else None
    return base.Preflight(plan, rows, title="SageMaker job", error=error)


def _runtime_note(opts, given, plan) -> str:
    """Where the max runtime above comes from (the same words as the EC2 dry-run's)."""
    if given is not None:
        return "--max-runtime"
    seconds, why = default_runtime(plan)
    if opts.max_runtime is not None and opts.max_runtime < seconds:
        return f"what --max-eur {opts.max_eur:g} pays for"
    return why


_NO_REGION = preflight.Problem(
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
