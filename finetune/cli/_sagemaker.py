"""`launch --backend sagemaker`: its options turned into JobOptions, a backend that draws the
upload's progress bar, and the dry-run's request summary. Logic lives in the library."""

from __future__ import annotations

import sys

import typer

from finetune.errors import UsageError


def resources(instance: str | None, count: int, spot: bool):
    from finetune.backends.sagemaker.launch import resources as sm_resources

    return sm_resources(instance, count, spot)


def build_plan(recipe, dataset, resources, overrides, options):
    """The plan (local folder or s3:// dataset) with its estimate for the chosen region."""
    from finetune.aws.session import configured_region
    from finetune.backends.sagemaker.launch import build_plan as sm_build_plan

    region = configured_region(options.region)
    return sm_build_plan(recipe, dataset, resources, overrides, region)


def job_options(
    *,
    region: str | None,
    max_runtime: str | None,
    max_wait: str | None,
    max_eur: float | None,
    image: str | None,
    subnets: list[str] | None,
    security_groups: list[str] | None,
    kms_key: str | None,
    spot: bool,
    read_prefixes: list[str] | None = None,
):
    """JobOptions from the command line (settings fill the rest at submit time)."""
    from finetune.backends.sagemaker.request import JobOptions
    from finetune.cli._duration import parse_duration

    if max_wait and not spot:
        raise UsageError("--max-wait applies to spot jobs only", "add --spot, or drop --max-wait.")
    return JobOptions(
        region=region,
        image=image,
        max_runtime_s=parse_duration(max_runtime, "--max-runtime") if max_runtime else None,
        max_wait_s=parse_duration(max_wait, "--max-wait") if max_wait else None,
        max_eur=max_eur,
        kms_key_id=kms_key,
        subnets=tuple(subnets or ()),
        security_group_ids=tuple(security_groups or ()),
        read_prefixes=tuple(read_prefixes or ()),
    )


def backend(options):
    """A SageMakerBackend that reports on stderr and shows the upload on a terminal."""
    from finetune.backends import get_backend

    return get_backend(
        "sagemaker",
        options=options,
        progress=_progress if sys.stderr.isatty() else None,
        notify=lambda message: typer.echo(message, err=True),
    )


def _progress(label: str, total: int):
    """A rich bar for ``total`` bytes that closes itself when they are done."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    bar = Progress(
        TextColumn(f"{label:<16}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=Console(stderr=True),
    )
    task = bar.add_task(label, total=total)
    bar.start()
    done = [0]

    def advance(n: int) -> None:
        done[0] += n
        bar.advance(task, n)
        if done[0] >= total:
            bar.stop()

    if total <= 0:
        bar.stop()
    return advance


def print_request(plan, options) -> None:
    """The dry run's view of the job request (no credentials needed)."""
    from finetune.aws.session import configured_region
    from finetune.backends.sagemaker.launch import dry_run_lines

    typer.echo("SageMaker job:")
    for line in dry_run_lines(plan, options, configured_region(options.region)):
        typer.echo(f"  {line}")


def reject_for_local(**given) -> None:
    """Cloud options make no sense for the local backend: say so instead of ignoring them."""
    named = [f"--{k.replace('_', '-')}" for k, v in given.items() if v not in (None, False, (), [])]
    if named:
        raise UsageError(
            f"{', '.join(named)} {'applies' if len(named) == 1 else 'apply'} only to cloud "
            "backends",
            "add --backend sagemaker (or ec2), or drop them to run here.",
        )
