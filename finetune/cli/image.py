"""`finetune image`: the training image in ECR (built from our Dockerfile)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from finetune import __version__
from finetune.aws.image import push as push_image
from finetune.aws.session import connect
from finetune.cli._options import Help, Region, Repository, typed_flags

app = typer.Typer(help="The training image: build and push it to ECR.", no_args_is_help=True)


@app.command("push")
@typed_flags
def push(
    region: Region[str | None] = None,
    repository: Annotated[Repository, Help("ECR repository (the infra stack's).")] = "finetune",
    tag: str = typer.Option(None, help="Image tag (default: this finetune version)."),
    context: Path = typer.Option(Path("."), help="Docker build context (the repository root)."),
    dockerfile: str = typer.Option("Dockerfile", help="Dockerfile name inside the context."),
    base_digest: str = typer.Option(
        None,
        help="The base image's digest (sha256:<64 hex>) to build from; default: the "
        "Dockerfile's BASE_DIGEST. finetune's Dockerfile is never built from a bare tag.",
    ),
) -> None:
    """Build the training image where a Docker engine runs and push it to ECR; prints its URI
    (the default image of `launch --backend sagemaker`)."""
    aws = connect(region)
    uri = push_image(aws, context, repository, tag or __version__, dockerfile, base_digest)
    typer.echo(uri)
