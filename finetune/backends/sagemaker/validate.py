"""Validation of a SageMaker job request before any money is spent: every problem found at
once, each with its fix (the pre-flight, preflight.py, and submit run these).

``check_request`` needs nothing but the request (it runs for --dry-run too); the ``check_*``
functions taking a client ask AWS cheap questions (bucket region, what is under a prefix).
"""

from __future__ import annotations

import re
from dataclasses import replace

from finetune.aws import imageref, retries
from finetune.aws.errors import aws_errors
from finetune.aws.s3upload import list_prefix, parse_s3_uri
from finetune.backends import secretscan
from finetune.backends.base import PreflightError, Problem  # one shape on every backend
from finetune.catalog import instances
from finetune.errors import FinetuneError
from finetune.estimate import money

JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(\d{12}):role/[\w+=,.@/-]{1,512}$")
MAX_RUNTIME_LIMIT_S = 28 * 24 * 3600  # SageMaker's ceiling for MaxRuntimeInSeconds
# The shortest runtime --max-eur may shrink a job to: SageMaker bills per second with no
# minimum, but a job under a minute has not left its container's start-up (estimate.money).
MIN_RUNTIME_S = 60


def raise_if(problems: list[Problem]) -> None:
    if problems:
        raise PreflightError(problems)


def check_request(req: dict, region: str | None) -> list[Problem]:
    """Everything that can be checked without AWS: names, ARNs, limits, secrets, catalog."""
    problems = []
    checks = (_job_name, _role, _image, _times, _instance, _channels, _vpc, _hyperparameters)
    for check in checks:
        problems += check(req, region)
    problems += secrets_in("hyperparameter", req.get("HyperParameters", {}))
    problems += secrets_in("environment variable", req.get("Environment", {}))
    return problems


def _job_name(req: dict, region) -> list[Problem]:
    name = req.get("TrainingJobName", "")
    if JOB_NAME.match(name):
        return []
    return [
        Problem(
            f"job name {name!r} is not 1-63 letters, digits and hyphens",
            "use a name like finetune-20261122-101500-a3f9 (no underscores or dots).",
        )
    ]


def _role(req: dict, region) -> list[Problem]:
    arn = req.get("RoleArn") or ""
    if ROLE_ARN.match(arn):
        return []
    what = "no execution role is set" if not arn else f"{arn!r} is not an IAM role ARN"
    return [
        Problem(
            what,
            "unset FINETUNE_ROLE_ARN (finetune then creates a role for each run), or set it "
            "to arn:aws:iam::ACCOUNT:role/NAME.",
        )
    ]


def _image(req: dict, region) -> list[Problem]:
    image = req.get("AlgorithmSpecification", {}).get("TrainingImage") or ""
    ref = imageref.parse(image)  # SageMaker needs a tag or a digest
    if ref is None:
        return [
            Problem(
                f"training image {image!r} is not an ECR image URI with a tag or digest",
                "pass --image ACCOUNT.dkr.ecr.REGION.amazonaws.com/finetune:TAG, or run "
                "`finetune image push` first.",
            )
        ]
    if region and ref.region != region:
        return [
            Problem(
                f"the training image is in {ref.region} but the job runs in {region}",
                f"push the image to {region} (`finetune image push --region {region}`).",
            )
        ]
    return []


def _times(req: dict, region) -> list[Problem]:
    sc = req.get("StoppingCondition", {})
    runtime, wait = sc.get("MaxRuntimeInSeconds", 0), sc.get("MaxWaitTimeInSeconds")
    problems = []
    if not 0 < runtime <= MAX_RUNTIME_LIMIT_S:
        problems.append(Problem(f"max runtime {runtime} s is out of range", "use 1s to 28 days."))
    if req.get("EnableManagedSpotTraining") and (wait is None or wait < runtime):
        problems.append(
            Problem(
                f"--max-wait ({wait} s) is shorter than --max-runtime ({runtime} s)",
                "SageMaker needs MaxWait >= MaxRuntime: raise --max-wait or lower --max-runtime.",
            )
        )
    if req.get("EnableManagedSpotTraining") and not req.get("CheckpointConfig"):
        problems.append(Problem("a spot job without checkpoints", "set CheckpointConfig."))
    return problems


def _instance(req: dict, region) -> list[Problem]:
    name = req.get("ResourceConfig", {}).get("InstanceType", "")
    try:
        instances.get(name)
    except FinetuneError as exc:
        return [Problem(exc.what, exc.fix or "pick an instance type from the catalog.")]
    return []


def _channels(req: dict, region) -> list[Problem]:
    problems = []
    for channel in req.get("InputDataConfig", []):
        uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
        if not uri.startswith("s3://") or not uri.endswith("/"):
            problems.append(
                Problem(
                    f"channel {channel['ChannelName']}: {uri!r} is not an S3 prefix ending in /",
                    "a prefix without the slash also matches sibling prefixes; add it.",
                )
            )
    return problems


def _vpc(req: dict, region) -> list[Problem]:
    vpc = req.get("VpcConfig")
    if not vpc or (vpc.get("Subnets") and vpc.get("SecurityGroupIds")):
        return []
    return [
        Problem(
            "a VPC configuration needs both subnets and security groups",
            "pass --subnet and --security-group together (or neither).",
        )
    ]


def _hyperparameters(req: dict, region) -> list[Problem]:
    hp = req.get("HyperParameters", {})
    problems = []
    if len(hp) > 100:
        problems.append(Problem(f"{len(hp)} hyperparameters (SageMaker takes 100)", "drop some."))
    for key, value in hp.items():
        if len(key) > 256 or len(value) > 2500:
            problems.append(
                Problem(
                    f"hyperparameter {key[:40]!r} is too long (keys 256, values 2,500 characters)",
                    "shorten it in the recipe.",
                )
            )
    return problems


def secrets_in(kind: str, values: dict[str, str]) -> list[Problem]:
    """Secret-looking entries (backends/secretscan.py, the screen every backend uses): they
    would be visible to anyone who can describe the job."""
    found = secretscan.scan_map(kind, values)
    return [Problem(w, f) for w, f in secretscan.messages(found, "DescribeTrainingJob")]


def check_budget(charge, rate, seconds: int, max_eur: float) -> list[Problem]:
    """The worst case -- every host of ``charge`` (a estimate.money.Charge) billed for the whole
    max runtime, priced by estimate.money at ``rate`` -- must fit --max-eur."""
    worst = money.euros([replace(charge, seconds=seconds)], rate).eur
    if worst is None or worst <= max_eur:
        return []
    affordable = money.affordable_seconds(max_eur, charge, rate) or 0
    per_hour = money.eur_per_hour(replace(charge, instances=1), rate)
    if affordable < MIN_RUNTIME_S:  # "lower --max-runtime to 0 minutes" helps nobody
        least = money.smallest_cap(charge, rate, MIN_RUNTIME_S)
        return [
            Problem(
                f"--max-eur {max_eur:g} pays for {affordable} s of {charge.instances} x "
                f"{charge.instance_type} (EUR {per_hour:.2f}/h each); a job needs at least "
                f"{MIN_RUNTIME_S} s",
                f"raise --max-eur to {least:.2f} or more (what {MIN_RUNTIME_S} s costs), "
                "use fewer instances, or pick a cheaper instance type.",
            )
        ]
    return [
        Problem(
            f"the worst case costs EUR {worst:.2f} ({charge.instances} x EUR {per_hour:.2f}/h "
            f"for {seconds / 3600:g} h), more than --max-eur {max_eur:g}",
            f"lower --max-runtime to {affordable // 60} minutes or less, use fewer instances, "
            "or raise --max-eur.",
        )
    ]


def check_bucket_region(s3, bucket: str, region: str) -> list[Problem]:
    """SageMaker reads and writes only buckets in the job's region."""
    with aws_errors("GetBucketLocation", resource=f"s3://{bucket}", region=region):
        where = retries.call(s3.get_bucket_location, Bucket=bucket).get("LocationConstraint")
    where = {None: "us-east-1", "": "us-east-1", "EU": "eu-west-1"}.get(where, where)
    if where == region:
        return []
    return [
        Problem(
            f"bucket {bucket} is in {where}, the job would run in {region}",
            f"use --region {where}, or a bucket in {region} (FINETUNE_BUCKET).",
        )
    ]


def check_inputs(s3, channels: dict[str, str], expected: dict[str, list[str]]) -> list[Problem]:
    """Each channel prefix holds objects, including the files the trainer opens."""
    problems = []
    for channel, uri in channels.items():
        bucket, prefix = parse_s3_uri(uri)
        with aws_errors("ListObjectsV2", resource=uri):
            names = {k[len(prefix) :] for k in list_prefix(s3, bucket, prefix)}
        missing = [n for n in expected.get(channel, []) if n not in names]
        if not names or missing:
            problems.append(
                Problem(
                    f"S3 input {uri} is empty"
                    if not names
                    else f"{uri} lacks {', '.join(missing)}",
                    "launch with a local --dataset folder (finetune uploads it), or point "
                    "--dataset at the s3:// prefix finetune printed when it uploaded.",
                )
            )
    return problems
