"""`finetune launch`: recipe + dataset -> plan -> a run on a backend."""

from __future__ import annotations

import typer


def launch(
    recipe: str = typer.Argument(
        None, help="Recipe name (see `finetune recipes list`) or path to a recipe YAML."
    ),
    overrides: list[str] = typer.Argument(
        None, help="Recipe overrides as key=value, e.g. epochs=2 optimizer.lr_per_gpu=0.002."
    ),
    dataset: str = typer.Option(
        None,
        help="Prepared dataset: folder or name under the data dir (default: the recipe's); "
        "for sagemaker and ec2 also the s3:// prefix an earlier launch uploaded it to.",
    ),
    backend: str = typer.Option("local", help="Where to run: local, sagemaker or ec2."),
    gpus: str = typer.Option(
        None, help="Local backend: GPU numbers to use, e.g. 0,1 (default: all)."
    ),
    cpus: int = typer.Option(
        None, min=1, help="Local backend: train data-parallel over this many CPU contexts."
    ),
    instance: str = typer.Option(
        None, help="EC2/SageMaker: instance type, e.g. g5.xlarge, p3.8xlarge or ml.p3.8xlarge."
    ),
    count: int = typer.Option(
        1, min=1, help="EC2: instances (one per run); SageMaker: hosts of one job (lr scales)."
    ),
    spot: bool = typer.Option(
        False, "--spot", help="EC2/SageMaker: spot capacity (cheaper, interruptible)."
    ),
    max_runtime: str = typer.Option(
        None, help="EC2/SageMaker: stop after this long, e.g. 2h (EC2 default 6h, SageMaker 2h)."
    ),
    max_wait: str = typer.Option(
        None,
        help="SageMaker --spot: give up waiting for capacity after this long (default 2x runtime).",
    ),
    max_eur: float = typer.Option(
        None, help="EC2/SageMaker: never spend more than this many euros."
    ),
    image: str = typer.Option(
        None, help="SageMaker: training image URI (default: the one `finetune image push` pushed)."
    ),
    region: str = typer.Option(
        None, help="SageMaker: AWS region (default: FINETUNE_REGION, then your AWS config)."
    ),
    security_group: list[str] = typer.Option(
        None, help="SageMaker: VPC security group id (repeat; needs --subnet)."
    ),
    kms_key: str = typer.Option(None, help="SageMaker: KMS key for the volume and the output."),
    ami: str = typer.Option(None, help="EC2: AMI id (default: the Deep Learning Base GPU AMI)."),
    subnet: list[str] = typer.Option(
        None, help="EC2: subnet to try (repeat; in order). SageMaker: VPC subnet (repeat)."
    ),
    az: list[str] = typer.Option(None, help="EC2: availability zone to try (repeat)."),
    read_prefix: list[str] = typer.Option(
        None,
        help="EC2/SageMaker: an s3:// prefix in FINETUNE_BUCKET the run may read besides its "
        "dataset's own (repeat); needed for an s3:// --dataset outside finetune/datasets/.",
    ),
    max_restarts: int = typer.Option(
        3, min=0, help="EC2: relaunches after spot interruptions (resuming from checkpoints)."
    ),
    allow_on_demand_fallback: bool = typer.Option(
        False, "--allow-on-demand-fallback", help="EC2: relaunch on-demand when spot has none."
    ),
    fallback_instance: list[str] = typer.Option(
        None, help="EC2: another instance type a relaunch may use (repeat)."
    ),
    skip_data_checksums: bool = typer.Option(
        False,
        "--skip-data-checksums",
        help="Do not check the local dataset's files against the manifest's sha256 "
        "(checked by default; cached by size and mtime, so only changed files are read).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan and exit; run nothing."),
    detach: bool = typer.Option(False, "--detach", help="Start the run and return at once."),
    resume: str = typer.Option(None, help="Resume this run (id) from its last checkpoint."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan / final run as JSON."),
) -> None:
    """Fine-tune RECIPE on a prepared dataset. Batch and learning rate scale linearly with the
    number of devices; the derived values are shown before anything runs."""
    from finetune.backends import get_backend
    from finetune.cli._follow import follow_run, print_plan
    from finetune.cli._render import echo_json
    from finetune.plan import build_plan
    from finetune.runs import service
    from finetune.runs.ledger import open_default
    from finetune.runs.resources import local_resources

    if resume:
        with open_default() as ledger:
            run = ledger.get(resume)
            be = get_backend(run.backend)
            run = service.resume(run.id, be, ledger)
            typer.echo(f"Resumed {run.id} from its last checkpoint.", err=True)
            follow_run(run, be, ledger, detach, as_json)
        return
    if not recipe:
        raise typer.BadParameter("give a RECIPE (or --resume RUN)", param_hint="RECIPE")
    if backend == "ec2":
        from finetune.cli._ec2 import ec2_resources

        resources, gpu_ids = ec2_resources(instance, count, spot), ()
    elif backend == "sagemaker":
        from finetune.cli import _sagemaker as sm

        sm_opts = sm.job_options(
            region=region,
            max_runtime=max_runtime,
            max_wait=max_wait,
            max_eur=max_eur,
            image=image,
            subnets=subnet,
            security_groups=security_group,
            kms_key=kms_key,
            spot=spot,
            read_prefixes=read_prefix,
        )
        resources, gpu_ids = sm.resources(instance, count, spot), ()
    else:
        if backend == "local":
            from finetune.cli._sagemaker import reject_for_local

            reject_for_local(  # cloud options are an error here, not silently ignored
                instance=instance,
                count=count if count > 1 else None,
                spot=spot,
                max_runtime=max_runtime,
                max_wait=max_wait,
                max_eur=max_eur,
                image=image,
                region=region,
                subnet=subnet,
                security_group=security_group,
                kms_key=kms_key,
                read_prefix=read_prefix,
            )
        resources, gpu_ids = local_resources(gpus, cpus)
    if backend == "sagemaker":
        plan = sm.build_plan(recipe, dataset, resources, overrides or (), sm_opts)
    elif backend == "ec2" and dataset and dataset.startswith("s3://"):
        from finetune.aws import s3dataset
        from finetune.aws.session import configured_region

        summary = s3dataset.summarize(dataset, configured_region(None))
        plan = build_plan(recipe, summary, resources, overrides or ())
    else:
        verify = not skip_data_checksums
        plan = build_plan(recipe, dataset, resources, overrides or (), verify_checksums=verify)
    if backend == "ec2":  # every cloud plan shows what it will cost, before anything runs
        from finetune.aws.session import configured_region
        from finetune.backends.sagemaker.launch import with_estimate

        plan = with_estimate(plan, configured_region(None) or "us-east-1", "ec2")
    if dry_run:
        echo_json(plan.model_dump(mode="json")) if as_json else print_plan(plan)
        if backend == "sagemaker" and not as_json:
            sm.print_request(plan, sm_opts)
        return
    if backend == "sagemaker":
        be = sm.backend(sm_opts)
    else:
        be = get_backend(backend, gpu_ids=gpu_ids) if backend == "local" else get_backend(backend)
    if backend == "ec2":
        from finetune.cli._ec2 import ec2_backend

        be = ec2_backend(
            ami=ami,
            subnets=subnet,
            azs=az,
            max_runtime=max_runtime,
            max_eur=max_eur,
            max_restarts=max_restarts,
            allow_on_demand_fallback=allow_on_demand_fallback,
            fallback_instances=fallback_instance,
            read_prefixes=read_prefix,
        )
    if not as_json:
        print_plan(plan)
    with open_default() as ledger:
        run = service.launch(plan, be, ledger)
        typer.echo(f"Run {run.id} started ({be.name}); logs: finetune runs logs {run.id}", err=True)
        follow_run(run, be, ledger, detach, as_json)
