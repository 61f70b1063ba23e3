"""The steps of SageMaker submission that are not the backend's public surface: options for a
new or resumed run, the budget, the dataset's S3 location, the image check, the record kept
in the run dir, and CreateTrainingJob itself (with a retry that recognises its own job).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from finetune.aws import retries, sdk
from finetune.aws.errors import aws_errors
from finetune.aws.session import Aws
from finetune.backends.sagemaker import preflight
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker.preflight import Problem

RECORD_DIR = "sagemaker"  # in the run dir: options.json, one request per job, metrics


def options_for(given, run):
    """The options stored by an earlier attempt of this run (resume), else the given ones
    completed from the settings (FINETUNE_REGION, FINETUNE_BUCKET, FINETUNE_ROLE_ARN)."""
    from finetune import settings

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
    """The default image (where `finetune image push` puts it) and a runtime --max-eur affords."""
    from finetune import __version__

    if not opts.image:
        opts = replace(opts, image=rq.default_image(aws.account_id, aws.region, __version__))
    if opts.max_eur is not None:
        opts = _fit_budget(opts, plan, aws.region)
    return opts


def _fit_budget(opts, plan, region: str):
    """Without --max-runtime, the longest runtime --max-eur pays for (at most the default);
    with it, a refusal when the worst case costs more than --max-eur. Both priced by
    report.money, as the finished job will be."""
    from finetune.catalog import fx, prices
    from finetune.errors import FinetuneError
    from finetune.report import money

    try:
        price = prices.price(plan.resources.instance_type, region, "sagemaker")
    except FinetuneError as exc:
        raise preflight.PreflightError(
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
    if opts.max_runtime_s is None:
        affordable = money.affordable_seconds(opts.max_eur, charge, rate)
        opts = replace(opts, max_runtime_s=max(60, min(rq.DEFAULT_MAX_RUNTIME_S, affordable)))
    preflight.raise_if(preflight.check_budget(charge, rate, opts.runtime_seconds(), opts.max_eur))
    return opts


def next_attempt(backend_ref: str | None) -> int:
    """0 for a new run; n+1 after job NAME-rn (SageMaker never reuses a name)."""
    if not backend_ref:
        return 0
    name = backend_ref.rsplit("/", 1)[-1]
    head, _, tail = name.rpartition("-r")
    return int(tail) + 1 if head and tail.isdigit() else 1


def dataset_location(plan, bucket: str):
    """(upload or None, channel URIs, bytes): a local dataset is uploaded, an S3 one used."""
    from finetune.aws.s3upload import as_prefix, plan_upload

    path = plan.dataset.path
    if path.startswith("s3://"):
        root = as_prefix(path)
        return None, {c: f"{root}{c}/" for c in ("train", "validation")}, 0
    upload = plan_upload(path, bucket)
    return upload, upload.channels, upload.total_bytes


def expected_files(plan, channel: str) -> list[str]:
    """The files the trainer opens in ``channel`` (train or validation)."""
    from finetune.train.mltree import CHANNELS, channel_files

    return channel_files(plan.dataset.name, CHANNELS[channel], plan.dataset.test_count > 0)


_IMAGE_MISSING = ("ImageNotFoundException", "RepositoryNotFoundException")


def check_image(aws: Aws, image: str) -> list[Problem]:
    """An image in this account's ECR must exist: a missing one fails only after start-up."""
    m = preflight.ECR_IMAGE.match(image or "")
    if not m or m.group(1) != aws.account_id or m.group(2) != aws.region:
        return []
    repo, _, tag = image.split("/", 1)[1].partition(":")
    with aws_errors("DescribeImages", resource=image, region=aws.region):
        try:
            ecr = aws.client("ecr")
            retries.call(ecr.describe_images, repositoryName=repo, imageIds=[{"imageTag": tag}])
        except Exception as exc:
            if retries.error_code(exc) not in _IMAGE_MISSING:
                raise
            return [
                Problem(
                    f"the training image {image} is not in ECR",
                    "run `finetune image push` where Docker runs, or pass --image URI.",
                )
            ]
    return []


def record(run, opts, request: dict) -> None:
    """Options (for --resume) and the exact request, next to the run's other files."""
    if not run.run_dir:
        return
    folder = Path(run.run_dir) / RECORD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "options.json").write_text(json.dumps(opts.to_dict(), indent=2))
    name = request["TrainingJobName"]
    (folder / f"{name}-request.json").write_text(json.dumps(request, indent=2))


def create(aws: Aws, request: dict) -> str:
    """CreateTrainingJob (retried when throttled); returns the job ARN. If a retry finds the
    name taken by a job with this run's checkpoint prefix, an earlier attempt made it."""
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
