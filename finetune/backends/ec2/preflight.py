"""Before the first EC2 attempt: checks that cost nothing (and the dry run's pre-flight:
region, instances, runtime and euro caps, the account's quota), then the run's S3 prefix.

Preflight refuses what cannot work (several hosts, no bucket, no training image) before any
money is spent. The dataset goes to S3 once per content (finetune.aws.s3upload), the plan
next to the run's other objects, where the on-instance agent reads them.
"""

from __future__ import annotations

import hashlib
import json
import os

from finetune import settings
from finetune.aws import imageref
from finetune.aws.datasetscope import read_prefixes
from finetune.aws.errors import aws_errors
from finetune.aws.s3upload import as_prefix, plan_upload, upload_dataset
from finetune.aws.session import configured_region
from finetune.backends import base, runtime, secretscan
from finetune.backends.ec2 import cost as ec2_cost
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.options import Ec2Options
from finetune.backends.ec2.setup import ami as ec2_ami
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.setup import quota as ec2_quota
from finetune.backends.ec2.state import Candidate, Ec2State
from finetune.catalog import instances
from finetune.engines import registry
from finetune.errors import CloudError, ConfigError, FinetuneError, UsageError
from finetune.plan.estimate import with_estimate

IMAGE_ENVS = ("FINETUNE_EC2_IMAGE", "FINETUNE_IMAGE")


def missing_settings(plan, options: Ec2Options) -> list[base.Problem]:
    """Every setting the launch needs and does not have (region, bucket, our image where the
    engine needs it), each with its fix: a dry-run names them all at once."""
    problems = []
    if not configured_region(options.region):
        problems.append(base.Problem(
            "no AWS region is set for the ec2 backend",
            "pass --region REGION, or set FINETUNE_REGION (or a region in your AWS config).",
        ))  # fmt: skip
    if not settings.get().bucket:
        problems.append(base.Problem(
            "no S3 bucket is set for datasets, checkpoints and results",
            "deploy the stack with `finetune infra deploy` and set FINETUNE_BUCKET (or "
            "`finetune config set bucket NAME`) to its BucketName output.",
        ))  # fmt: skip
    engine = plan.hyperparameters.engine
    if registry.get(engine).needs_our_image and not configured_image():
        others = [e.name for e in registry.all_engines() if not e.needs_our_image]
        problems.append(base.Problem(
            f"the {engine} engine needs our training image, and none is configured",
            "run `finetune image push` and `finetune config set image URI` with the URI it "
            "prints (or FINETUNE_IMAGE)"
            + "".join(f"; or use the {e} engine (engine={e})" for e in others[:1]) + ".",
        ))  # fmt: skip
    return problems


def preflight(plan, options: Ec2Options, settings_checked: bool = True) -> str:
    """Refuse impossible runs; returns the instance's CPU architecture (for the AMI).
    ``settings_checked=False``: leave missing settings to the caller (a dry-run lists them
    all, missing_settings)."""
    res = plan.resources
    inst = instances.get(res.instance_type)
    instances.check_engine(
        plan.hyperparameters.engine, inst
    )  # e.g. MXNet on Hopper: before any AWS call
    for fallback in options.fallback_instance:
        instances.get(fallback)  # an unknown fallback type fails now, not after an interruption
    if options.max_runtime is not None and options.max_runtime < 600:
        raise UsageError(
            f"--max-runtime of {options.max_runtime} s leaves no time to train",
            "allow at least 10 minutes (e.g. --max-runtime 2h).",
        )
    name: str | None
    if settings_checked:
        name = bucket()
        if registry.get(plan.hyperparameters.engine).needs_our_image:  # else AWS's framework AMI
            image()
    else:
        name = settings.get().bucket
    screen(plan)
    if name and plan.dataset.path.startswith("s3://"):  # a run reads its dataset's prefix
        read_prefixes(plan.dataset.path, name, options.read_prefix)
    return inst.cpu_architecture or "x86_64"


def screen(plan) -> None:
    """Refuse a plan carrying secrets (backends/secretscan.py): plan.json goes to the run's S3
    prefix and the hyperparameters into the instance; checked before anything is sent."""
    found = secretscan.scan_map("hyperparameter", plan.hyperparameters.to_strings())
    found += secretscan.scan_document("plan.json", json.loads(plan.to_json()))
    secretscan.refuse(list(dict.fromkeys(found)), "the run's plan.json in S3")


def bucket() -> str:
    name = settings.get().bucket
    if not name:
        raise ConfigError(
            "the ec2 backend needs an S3 bucket for datasets, checkpoints and results",
            "set FINETUNE_BUCKET to a bucket in your region (the infra/ stack creates one).",
        )
    return name


def configured_image() -> str | None:
    found = next((os.environ[e] for e in IMAGE_ENVS if os.environ.get(e)), None)
    return found or settings.get().image


def image() -> str:
    found = configured_image()
    if not found:
        raise ConfigError(
            "the MXNet engine needs our training image, and none is configured for the ec2 backend",
            "run `finetune image push` (it builds the Dockerfile and pushes it to ECR) and "
            "`finetune config set image URI` (or FINETUNE_IMAGE) with the URI it prints, "
            "e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/finetune:0.4.0 (the run pins "
            "it to its digest at launch); or use the "
            "PyTorch engine (engine=torch), which needs no image.",
        )
    return found


def pin_image(clients, uri: str, region: str) -> str:
    """The training image by digest (finetune.aws.imageref), resolved before anything of the
    run is created: a tag pushed again later cannot change what this run executes."""
    try:
        account = ec2_infra.account(clients("sts", region))
        return imageref.pin(clients("ecr", region), uri, account, region)
    except imageref.ImageMissing:
        raise ConfigError(
            f"the training image {uri} is not in ECR",
            "push it first (`finetune image push`), or set FINETUNE_IMAGE to an image that exists.",
        ) from None
    except ConfigError:
        raise
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"resolving {uri} to its digest") from None


def state_for(plan, run, options: Ec2Options | None, clients) -> Ec2State:
    """The run's state: loaded (resume, retried launch; new ``options`` replace the stored
    ones), or created, with the run's S3 prefix filled first."""
    state = Ec2State.load(run.run_dir)
    if state is None:
        options = with_runtime(options or Ec2Options(), plan)
        preflight(plan, options)
        state = new_state(plan, run, options, clients)
        state.save(run.run_dir)
    elif options is not None:
        if options.max_runtime is None:  # a resume without --max-runtime: the run's own cap
            options = options.model_copy(update={"max_runtime": state.options.max_runtime})
        state.options = options
    return state


def with_runtime(options: Ec2Options, plan) -> Ec2Options:
    """--max-runtime as given, else the cap every cloud backend gives a run of ``plan``
    (backends.runtime.default_runtime); --max-eur may shorten it further (ec2.cost.runtime_cap)."""
    if options.max_runtime is not None:
        return options
    return options.model_copy(update={"max_runtime": runtime.default_runtime(plan)[0]})


def new_state(plan, run, options: Ec2Options, clients) -> Ec2State:
    """The run's S3 prefix filled (dataset, plan) and its state record started."""
    region = ec2_infra.region_name(options.region)
    s3 = clients("s3", region)
    name = bucket()
    # our image, where the engine needs it, pinned to its digest before anything is uploaded;
    # an engine on AWS's framework AMI (recorded in the plan's runtime) needs no image of ours
    ours = registry.get(plan.hyperparameters.engine).needs_our_image
    pinned = pin_image(clients, image(), region) if ours else ""
    if plan.dataset.path.startswith("s3://"):  # already uploaded (checked by the plan)
        dataset_uri = as_prefix(plan.dataset.path)
    else:
        upload = plan_upload(plan.dataset.path, name)  # content-addressed: uploaded once
        upload_dataset(s3, upload)
        dataset_uri = upload.uri
    prefix = p.run_prefix(run.id)
    if pinned:
        plan = plan.model_copy(update={"image": pinned})  # the agent's plan.json records it
    body = plan.to_json().encode()
    with aws_errors("PutObject", resource=f"s3://{name}/{prefix}{p.PLAN}", region=region):
        ec2_infra.call(s3.put_object, Bucket=name, Key=prefix + p.PLAN, Body=body)
    return Ec2State(
        region=region,
        bucket=name,
        prefix=prefix,
        dataset_uri=dataset_uri,
        image=pinned,  # every attempt, relaunches included, pulls this digest
        owner=ec2_infra.owner(clients("sts", region)),
        options=options,
        plan_sha256=hashlib.sha256(body).hexdigest(),  # every attempt's user data names it
    )


def dry_run(plan, options: Ec2Options, clients, history=()):
    """Preflight (bucket, image, runtime, fallbacks), the region, the runtime --max-eur
    affords at the price the launch would pay, and the family's vCPU quota; returns the
    base.Preflight and the prices asked (ec2.cost.Quotes: the launch right after uses them).
    ``history``: measured runs, given by the caller (the estimate prefers them)."""
    arch = preflight(plan, options, settings_checked=False)  # engine on these GPUs, fallbacks
    engine = plan.hyperparameters.engine
    plan = plan.with_runtime(ec2_ami.runtime(engine, arch, options.ami))
    missing = missing_settings(plan, options)
    region = configured_region(options.region)
    if not region:  # nothing can be priced: every missing setting, before the plan
        raise base.PreflightError(missing)
    plan = with_estimate(plan, region, "ec2", history)
    given = options.max_runtime
    options = with_runtime(options, plan)  # as the launch will (state_for)
    res = plan.resources
    choice = Candidate(res.instance_type, res.spot)
    quotes = ec2_cost.quotes([choice], region, clients("ec2", region))  # the launch's, too
    quote = quotes.of(choice)
    usd, source = quote.usd_per_hour, quote.source
    state = Ec2State(region, "", "", "", "", "", options)  # a new run: nothing spent yet
    # the same guard as the launch: the dearest choice (here the only one), all its hosts
    cap = ec2_cost.runtime_cap(state, ec2_cost.dearest({choice: quote}, res.hosts))
    inst = instances.get(res.instance_type)
    needed = inst.vcpus * res.hosts
    found = ec2_quota.read(clients("service-quotas", region), res.instance_type, res.spot)
    rows = [
        ("region", region),
        ("instances", f"{res.hosts} x {res.instance_type} ({'spot' if res.spot else 'on demand'})"),
        ("price", f"USD {usd:.3f}/h per instance ({source})" if usd else source),
        ("runtime cap", _hours(cap) + _why_cap(cap, options, given, plan)),
        ("euro cap", f"EUR {options.max_eur:g}" if options.max_eur else "none (--max-eur)"),
        ("quota", _quota_row(found, needed)),
        ("bucket", settings.get().bucket or "not set"),
    ]
    if registry.get(engine).needs_our_image:  # else AWS's framework AMI: no image of ours
        rows.insert(-1, ("image", configured_image() or "not set"))
    why = ec2_quota.problem(found, needed, region)
    error: FinetuneError | None = None
    if why:
        error = CloudError(why, ec2_quota.how_to_raise(found, needed, region))
    if missing:  # every missing setting at once, after the plan (as the SageMaker backend)
        quota = [base.Problem(why, ec2_quota.how_to_raise(found, needed, region))] if why else []
        error = base.PreflightError(missing + quota)
    return base.Preflight(plan, rows, title="EC2 instances", error=error), quotes


def _hours(seconds: int) -> str:
    return f"{seconds / 3600:.2f} h ({seconds} s)"


def _why_cap(cap: int, options: Ec2Options, given, plan) -> str:
    if options.max_runtime is not None and cap < options.max_runtime:
        return f", what --max-eur {options.max_eur:g} pays for"
    return " (--max-runtime)" if given is not None else f" ({runtime.default_runtime(plan)[1]})"


def _quota_row(found: ec2_quota.Quota, needed: int) -> str:
    if found.vcpus is None:
        return f"{found.name}: not readable ({found.why_unknown}); needs {needed} vCPUs"
    return f"{found.name}: {found.vcpus:g} vCPUs; this launch needs {needed}"
