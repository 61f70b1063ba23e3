"""`finetune launch`: recipe + dataset -> plan -> a run on a backend."""

from __future__ import annotations

import typer


def launch(
    recipe: str = typer.Argument(
        None, help="Recipe name (see `finetune recipes list`) or path to a recipe YAML."
    ),
    overrides: list[str] = typer.Argument(
        None, help="Recipe overrides as key=value, e.g. epochs=2 optimizer.lr_per_device=0.002."
    ),
    dataset: str = typer.Option(
        None,
        help="Prepared dataset: folder or name under the data dir (default: the recipe's); "
        "for sagemaker and ec2 also the s3:// prefix an earlier launch uploaded it to.",
    ),
    backend: str = typer.Option(
        None, help="Where to run: local (the default: this machine), sagemaker or ec2."
    ),
    gpus: str = typer.Option(
        None, help="Local backend: GPU numbers to use, e.g. 0,1 (default: all)."
    ),
    cpus: int = typer.Option(
        None, min=1, help="Local backend: train data-parallel over this many CPU contexts."
    ),
    instance: str = typer.Option(
        None,
        help="EC2/SageMaker: instance type, e.g. g5.xlarge, p3.8xlarge or ml.p3.8xlarge; or "
        "cheapest / fastest: picked (with the backend and --count) from `finetune plan`.",
    ),
    deadline: str = typer.Option(
        None, help="With --instance cheapest: the cheapest that finishes within this, e.g. 3h."
    ),
    budget: float = typer.Option(
        None, help="With --instance fastest: the fastest that costs at most this many euros."
    ),
    count: int = typer.Option(
        1, min=1, help="EC2: instances (one per run); SageMaker: hosts of one job (lr scales)."
    ),
    spot: bool = typer.Option(
        False, "--spot", help="EC2/SageMaker: spot capacity (cheaper, interruptible)."
    ),
    max_runtime: str = typer.Option(
        None,
        help="EC2/SageMaker: stop after this long, e.g. 2h (default: 1.5 x the estimate's slow "
        "end, at least 1h; 6h without an estimate).",
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
        None, help="EC2/SageMaker: AWS region (default: FINETUNE_REGION, then your AWS config)."
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
        None,
        min=0,
        help="EC2: relaunches after spot interruptions, resuming from checkpoints (default 3).",
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
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="With the plan: the estimate's every figure and source."
    ),
    detach: bool = typer.Option(False, "--detach", help="Start the run and return at once."),
    resume: str = typer.Option(None, help="Resume this run (id) from its last checkpoint."),
    fmt: str = typer.Option(
        "table", "--format", help="table, json (the plan / final run) or csv (--dry-run's plan)."
    ),
    as_json: bool = typer.Option(False, "--json", hidden=True, help="Deprecated: --format json."),
) -> None:
    """Fine-tune RECIPE on a prepared dataset. Batch and learning rate scale linearly with the
    number of devices; the derived values are shown before anything runs. Each backend takes
    the options marked with its name; --dry-run runs every check a launch runs and creates
    nothing."""
    from finetune import service
    from finetune.backends.base import ResourceRequest
    from finetune.cli._follow import follow_run, hooks, print_plan
    from finetune.cli._render import output_format, record_csv
    from finetune.runs.ledger import open_default

    fmt = output_format(fmt, as_json)
    as_json = fmt == "json"
    if resume:
        with open_default() as ledger:
            run, be = service.resume(ledger, resume, hooks())
            typer.echo(f"Resumed {run.id} from its last checkpoint.", err=True)
            follow_run(run, be, ledger, detach, as_json)
        return
    if not recipe:
        raise typer.BadParameter("give a RECIPE (or --resume RUN)", param_hint="RECIPE")
    choice = _picked(instance, recipe, dataset, overrides, backend, spot, region, deadline, budget)
    if choice is not None:  # --instance cheapest|fastest: the plan's pick, said on stderr
        backend, instance, count, spot = choice.backend, choice.instance, choice.count, choice.spot
        region = choice.region
    request = service.LaunchRequest(
        backend=backend,
        recipe=recipe,
        dataset=dataset,
        overrides=tuple(overrides or ()),
        resources=ResourceRequest(instance=instance, count=count, spot=spot),
        options=dict(  # each backend's options model takes the ones it knows, by name
            gpus=gpus,
            cpus=cpus,
            region=region,
            max_runtime=max_runtime,
            max_wait=max_wait,
            max_eur=max_eur,
            image=image,
            security_group=tuple(security_group or ()),
            kms_key=kms_key,
            ami=ami,
            subnet=tuple(subnet or ()),
            az=tuple(az or ()),
            max_restarts=max_restarts,
            allow_on_demand_fallback=allow_on_demand_fallback,
            fallback_instance=tuple(fallback_instance or ()),
            read_prefix=tuple(read_prefix or ()),
        ),
        verify_checksums=not skip_data_checksums,
    )
    planned = service.plan_launch(request, hooks())
    if dry_run and fmt == "csv":
        typer.echo(record_csv(planned.preflight.plan.model_dump(mode="json")), nl=False)
    elif dry_run or not as_json:
        print_plan(planned.preflight, as_json, verbose)
    planned.preflight.raise_if_failed()  # after the plan: what would stop the launch
    if dry_run:
        return
    service.fetch_weights(planned.weights, hooks())  # before the run exists: nothing half-made
    with open_default() as ledger:
        run = service.launch(planned.plan, planned.backend, ledger)
        be = planned.backend
        typer.echo(f"Run {run.id} started ({be.name}); logs: finetune runs logs {run.id}", err=True)
        follow_run(run, be, ledger, detach, as_json)


def _picked(instance, recipe, dataset, overrides, backend, spot, region, deadline, budget):
    """The plan's pick for --instance cheapest|fastest (shown on stderr), None for an instance
    type; --deadline/--budget are refused without a pick (finetune.ranking.choose)."""
    from finetune.ranking import choose as pick

    pick.check_flags(instance, deadline, budget)
    if not pick.is_pick(instance):
        return None
    from finetune.units.durations import parse_duration
    from finetune.units.eurocap import check_max_eur

    choice = pick.choose(
        instance, recipe, dataset, tuple(overrides or ()), backend=backend, spot=spot,
        region=region, deadline_s=parse_duration(deadline, "--deadline") if deadline else None,
        budget_eur=check_max_eur(budget, "--budget"),
    )  # fmt: skip
    typer.echo("\n".join(choice.lines), err=True)
    return choice
