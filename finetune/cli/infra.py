"""`finetune infra`: the CloudFormation stack cloud runs need (bucket, ECR repository, caller
policies, the boundary of per-run roles): print it or deploy it."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from finetune import settings
from finetune.aws import infra, legacyroles, perimeter, roletrust
from finetune.aws.session import connect
from finetune.cli._options import Format, Help, Region, Repository, typed_flags
from finetune.cli._records import record_csv
from finetune.cli._render import FORMATS, check_format, echo_json
from finetune.errors import UsageError

app = typer.Typer(
    help="The AWS stack for SageMaker runs: print or deploy it.", no_args_is_help=True
)


@app.command("print")
@typed_flags
def print_template(
    policy: str = typer.Option(
        None,
        help="Print one policy as plain IAM JSON instead: caller, ec2-caller, ec2-boundary, "
        "sagemaker-boundary, or perimeter (a resource control policy for your organization).",
    ),
    account: str = typer.Option(None, help="Account id to put in the policy's ARNs."),
    region: Annotated[Region[str | None], Help("Region to put in the policy's ARNs.")] = None,
    bucket: str = typer.Option(None, help="Bucket to put in the policy (default FINETUNE_BUCKET)."),
) -> None:
    """Print the CloudFormation template, or one of its policies filled in."""
    if not policy:
        typer.echo(infra.template_text(), nl=False)
        return
    conf = settings.get()
    names = infra.Names(
        account=account or "ACCOUNT_ID",
        region=region or conf.region or "REGION",
        bucket=bucket or conf.bucket or "BUCKET",
    )
    typer.echo(json.dumps(infra.render(infra.policy_document(policy), names), indent=2))


@app.command("deploy")
@typed_flags
def deploy(
    stack_name: str = typer.Option("finetune", help="CloudFormation stack name."),
    region: Region[str | None] = None,
    repository: Annotated[
        Repository, Help("ECR repository name for the training image.")
    ] = "finetune",
    fmt: Annotated[Format, Help("table, json or csv (key,value): the stack's outputs.")] = "table",
    vpc: str = typer.Option(
        None, help="The only VPC EC2 runs may use (default: the region's default VPC)."
    ),
    parameter: list[str] = typer.Option(
        None,
        "--parameter",
        help="A template parameter as KEY=VALUE, e.g. Ec2InstanceTypes=g5.*,g6.* or "
        "MaxRuntimeSeconds=14400 (repeatable).",
    ),
) -> None:
    """Create or update the stack, wait for it, and print the settings to export."""
    fmt = check_format(fmt, FORMATS)  # before the stack is touched
    params = dict(_key_value(p) for p in parameter or ())
    aws = connect(region)
    typer.echo(f"Deploying stack {stack_name} in {aws.region} ...", err=True)
    outputs = infra.deploy(aws, stack_name, repository, vpc=vpc, parameters=params)
    fence = perimeter.status(aws.client("organizations"), aws.account_id, aws.region)
    if fmt != "table":
        record = dict(sorted(outputs.items()))
        if fmt == "json":
            echo_json(record)
        else:
            typer.echo(record_csv(record), nl=False)
        for line in fence.lines():  # stdout holds the outputs only
            typer.echo(line, err=True)
        return
    for key, value in sorted(outputs.items()):
        typer.echo(f"{key:<18} {value}")
    typer.echo(
        "\nSet these (and attach CallerPolicyArn and/or Ec2CallerPolicyArn to whoever runs "
        "finetune):"
    )
    for line in infra.env_lines(outputs):
        typer.echo(line)
    typer.echo("")
    for line in fence.lines():
        typer.echo(line)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(
            f"--parameter {text!r} is not KEY=VALUE", "e.g. --parameter MaxInstances=2."
        )
    return key.strip(), value.strip()


@app.command("check")
def check(region: Region[str | None] = None) -> None:
    """List run roles older finetune versions left at /finetune/ (those without a permissions
    boundary first) and how to remove them, and run roles under /finetune-bounded/ whose trust
    names anyone but their AWS service (another account, an OIDC or SAML provider) and how to
    fix it; exits 1 while any is left. Says whether the run-role perimeter is attached as a
    resource control policy (unknown where AWS Organizations cannot be read). Needs
    iam:ListRoles, iam:GetRole and the list calls of the roles' policies and profiles (an
    administrator), and to tell the perimeter the Organizations reads of the management
    account."""
    aws = connect(region)
    iam = aws.client("iam")
    found = legacyroles.find(iam)
    trusting = roletrust.find(iam, aws.account_id)
    if found:
        for line in legacyroles.report(found):
            typer.echo(line)
    else:
        typer.echo("No run roles of older finetune versions: nothing to remove.")
    if trusting:
        typer.echo("")
        for line in roletrust.report(trusting):
            typer.echo(line)
    else:
        typer.echo("Every run role under /finetune-bounded/ trusts only its AWS service.")
    for line in perimeter.status(aws.client("organizations"), aws.account_id, aws.region).lines():
        typer.echo(line)
    typer.echo("Whether this account is ready for a run: `finetune check`.")
    if found or trusting:
        raise typer.Exit(1)
