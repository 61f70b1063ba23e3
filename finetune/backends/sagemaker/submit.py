"""The steps of SageMaker submission that are not the backend's public surface: options for a
new or resumed run, the budget, the dataset's S3 location, the image check, the record kept
in the run dir, and CreateTrainingJob itself (with a retry that recognises its own job).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from finetune import settings
from finetune.aws import imageref, retries, sdk, stacklimits
from finetune.aws.datasetscope import read_prefixes as allowed_reads
from finetune.aws.errors import aws_errors
from finetune.aws.s3upload import as_prefix, plan_upload
from finetune.aws.session import Aws
from finetune.backends.runtime import default_runtime
from finetune.backends.sagemaker import images, sourcedir, validate
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker.findjob import RECORD_DIR
from finetune.backends.sagemaker.validate import Problem
from finetune.catalog import fx, prices
from finetune.data.channels import CHANNELS, channel_files
from finetune.engines import registry
from finetune.errors import FinetuneError
from finetune.estimate import money
from finetune.runs.spend import budget_seconds


def options_for(given, run):
    """The options stored by an earlier attempt of this run (resume), else the given ones
    completed from the settings (FINETUNE_REGION, FINETUNE_BUCKET, FINETUNE_ROLE_ARN: a
    role of the user's own instead of the run's)."""
    stored = Path(run.run_dir or ".") / RECORD_DIR / "options.json"
    if run.run_dir and stored.is_file():
        return rq.JobOptions.from_dict(json.loads(stored.read_text()))
    conf = settings.get()
    return replace(
        given,
        region=given.region or conf.region,
        bucket=given.bucket or conf.bucket,
        role_arn=given.role_arn or conf.role_arn,
    )


def tensorboard_location(run) -> str | None:
    """The run's TensorBoard prefix (request.tensorboard_uri) in the bucket its submission
    stored; None for a run never submitted (no options.json)."""
    stored = Path(run.run_dir or ".") / RECORD_DIR / "options.json"
    if not (run.run_dir and stored.is_file()):
        return None
    bucket = rq.JobOptions.from_dict(json.loads(stored.read_text())).bucket
    return rq.tensorboard_uri(bucket, run.id) if bucket else None


def missing_settings(opts) -> list[Problem]:
    """The bucket has no default (the role's absence is reported with the request checks)."""
    if opts.bucket:
        return []
    return [
        Problem(
            "no S3 bucket is set for datasets, outputs and checkpoints",
            "deploy the stack with `finetune infra deploy` and set FINETUNE_BUCKET to its "
            "BucketName output.",
        )
    ]


def with_defaults(opts, plan, aws: Aws):
    """The engine's default image (AWS's PyTorch image, or where `finetune image push` puts
    ours) and a runtime --max-eur affords."""
    if not opts.image:
        opts = replace(opts, image=engine_image(plan, aws.account_id, aws.region))
    return with_runtime(opts, plan, aws.region)


def with_runtime(opts, plan, region: str):
    """--max-runtime as given, else the cap every cloud backend gives a run of ``plan``
    (backends/runtime.py), shortened to what --max-eur pays for."""
    if opts.max_eur is not None:
        return fit_budget(opts, plan, region)
    if opts.max_runtime is None:
        opts = replace(opts, max_runtime=default_runtime(plan)[0])
    return opts


def engine_image(plan, account: str, region: str) -> str:
    """The training image for ``plan`` when --image is not given: AWS's PyTorch training
    image for the torch engine, else where `finetune image push` puts ours in ``account``'s
    ECR. Submit and --dry-run both ask here, so they agree."""
    engine, instance = plan.hyperparameters.engine, plan.resources.instance_type
    ours = settings.get().image  # `config set image`: our image, where the engine needs ours
    if ours and registry.get(engine).needs_our_image:
        return ours
    return images.default_image(engine, region, instance, account)


def check_stack_limits(aws: Aws, request: dict) -> None:
    """Refuse what the stack's parameters (the caller policy's conditions) would deny:
    instance type, instance count, runtime, the job's subnets and security groups
    (finetune.aws.stacklimits)."""
    limits = stacklimits.read(aws.client("cloudformation"))
    rc = request["ResourceConfig"]
    stacklimits.check_types(limits, "SageMakerInstanceTypes", [rc["InstanceType"]])
    stacklimits.check_count(limits, rc["InstanceCount"])
    stacklimits.check_runtime(limits, request["StoppingCondition"]["MaxRuntimeInSeconds"])
    vpc = request.get("VpcConfig") or {}
    stacklimits.check_sagemaker_network(
        limits, vpc.get("Subnets", ()), vpc.get("SecurityGroupIds", ())
    )


def fit_budget(opts, plan, region: str):
    """Without --max-runtime, the longest runtime --max-eur pays for (at most the default);
    with it, a refusal when the worst case costs more than --max-eur. Both priced by
    estimate.money, as the finished job will be."""
    try:
        price = prices.price(plan.resources.instance_type, region, "sagemaker")
    except FinetuneError as exc:
        raise validate.PreflightError(
            [Problem(f"--max-eur needs a price: {exc.what}", exc.fix or "")]
        ) from None
    charge = money.Charge(
        rule=money.SAGEMAKER,
        instance_type=price.display_name,
        instances=plan.resources.hosts,
        seconds=0,
        usd_per_hour=price.usd_per_hour,  # managed spot too: it bills fewer seconds, not less
        price_source=price.source,
        price_as_of=price.as_of_iso,
    )
    rate = fx.eur_rate()
    if opts.max_runtime is None:
        affordable = budget_seconds(opts.max_eur, 0.0, charge, rate)  # the one budget rule
        cap = default_runtime(plan)[0]  # the same default as every cloud backend's
        if affordable is not None:  # None: no price (the charge above always has one)
            cap = min(cap, affordable)
        runtime = max(validate.MIN_RUNTIME_S, cap)
        opts = replace(opts, max_runtime=runtime)
    validate.raise_if(validate.check_budget(charge, rate, opts.runtime_seconds(), opts.max_eur))
    return opts


def next_attempt(backend_ref: str | None) -> int:
    """0 for a new run; n+1 after job NAME-rn (SageMaker never reuses a name)."""
    if not backend_ref:
        return 0
    name = backend_ref.rsplit("/", 1)[-1]
    head, _, tail = name.rpartition("-r")
    return int(tail) + 1 if head and tail.isdigit() else 1


def dataset_location(plan, bucket: str, read_prefixes: tuple[str, ...] = ()):
    """(upload or None, channel URIs, bytes): a local dataset is uploaded, an S3 one used --
    if it lies where a run may read (finetune.aws.datasetscope)."""
    path = plan.dataset.path
    if path.startswith("s3://"):
        root = as_prefix(path)
        allowed_reads(root, bucket, read_prefixes)
        return None, {c: f"{root}{c}/" for c in ("train", "validation")}, 0
    upload = plan_upload(path, bucket)
    return upload, upload.channels, upload.total_bytes


def expected_files(plan, channel: str) -> list[str]:
    """The files the trainer opens in ``channel`` (train or validation)."""
    return channel_files(plan.dataset.name, CHANNELS[channel], plan.dataset.test_count > 0)


def pin_image(aws: Aws, image: str) -> tuple[str, list[Problem]]:
    """(the image by digest, problems): a tag in this account's ECR is resolved once, so the
    job -- and a resumed one, through the stored options -- runs exactly that image."""
    with aws_errors("DescribeImages", resource=image, region=aws.region):
        try:
            return imageref.pin(aws.client("ecr"), image, aws.account_id, aws.region), []
        except imageref.ImageMissing:
            return image, [
                Problem(
                    f"the training image {image} is not in ECR",
                    "run `finetune image push` where Docker runs, or pass --image URI.",
                )
            ]


def pinned(opts, request: dict, image: str):
    """``opts`` and ``request`` with the training image replaced by its digest reference."""
    spec = {**request["AlgorithmSpecification"], "TrainingImage": image}
    return replace(opts, image=image), {**request, "AlgorithmSpecification": spec}


def source_dir(plan, opts, run_id: str):
    """The source directory of an engine that runs in AWS's framework image (None for one
    that runs our image, which holds our package)."""
    if registry.get(plan.hyperparameters.engine).needs_our_image:
        return None

    return sourcedir.build(opts.bucket, run_id, bool(plan.hyperparameters.metric_loggers))


def record(run, opts, request: dict) -> None:
    """Options (for --resume) and the exact request, next to the run's other files."""
    if not run.run_dir:
        return
    folder = Path(run.run_dir) / RECORD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "options.json").write_text(json.dumps(opts.to_dict(), indent=2))
    name = request["TrainingJobName"]
    (folder / f"{name}-request.json").write_text(json.dumps(request, indent=2))


ROLE_PROPAGATION_TRIES = 6  # a new IAM role takes seconds before SageMaker may assume it


def create(aws: Aws, request: dict, new_role: bool = False) -> str:
    """CreateTrainingJob (retried when throttled; with ``new_role``, also while SageMaker
    cannot assume the role just created); returns the job ARN. If a retry finds the
    name taken by a job with this run's checkpoint prefix, an earlier attempt made it."""
    for n in range(1, ROLE_PROPAGATION_TRIES + 1):
        try:
            return _create(aws, request)
        except Exception as exc:
            young = new_role and "assume" in str(exc).lower() and n < ROLE_PROPAGATION_TRIES
            if not young:
                raise
            retries.sleep(5.0 * n)
    raise AssertionError("unreachable")


def _create(aws: Aws, request: dict) -> str:
    cls = sdk.training_job_class()
    kwargs = sdk.request_to_kwargs(request)
    name = request["TrainingJobName"]

    def attempt():
        try:
            return cls.create(**kwargs, session=aws.session, region=aws.region)
        except Exception as exc:
            if retries.error_code(exc) != "ResourceInUse":
                raise
            found = cls.get(training_job_name=name, session=aws.session, region=aws.region)
            ours = request["CheckpointConfig"]["S3Uri"]
            if sdk.to_plain(found).get("CheckpointConfig", {}).get("S3Uri") != ours:
                raise  # somebody else's job: a real name clash
            return found

    with aws_errors("CreateTrainingJob", resource=name, region=aws.region):
        job = retries.call(attempt)
    return job.training_job_arn
