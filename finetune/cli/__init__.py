"""The `finetune` command line: Typer only. Each command parses, calls one library function
and renders. The root group imports a command's module when that command is asked for, so
`finetune --help`, listed from PANELS, imports none of them."""

from __future__ import annotations

import importlib
import signal
from difflib import get_close_matches

import typer
from typer.core import TyperCommand, TyperGroup

from finetune import __version__
from finetune.cli._render import set_quiet
from finetune.errors import FinetuneError
from finetune.textsafe import printable

# `finetune --help` lists the commands in the order of the work, in named groups (plain click
# formatting: rich's help panels would import rich and change every help page). Per command:
# "module.attribute" under finetune.cli (a function, or a Typer app for a group) and its short
# help, which tests/test_cli.py holds equal to the command's own.
PANELS: dict[str, dict[str, tuple[str, str]]] = {
    "Data": {
        "prepare": (
            "prepare.app",
            "Package images into MXNet RecordIO (.rec/.idx/.lst) with a seeded train/val split "
            "and a manifest.json (classes, counts, parameters, checksums).",
        ),
        "test-io": (
            "testio.test_io",
            "Read and decode a prepared .rec the way training does and print images/s (MXNet's "
            "--test-io as a command).",
        ),
    },
    "Training": {
        "launch": ("launch.launch", "Fine-tune RECIPE on a prepared dataset."),
        "runs": ("runs.app", "Runs recorded in the ledger: list, show, logs, stop, rm, prune."),
        "cost-report": (
            "cost_report.cost_report",
            "Per run: recipe, dataset, status, backend, engine, instance, devices, spot, wall "
            "and billable time, images/s (per run and per device), speedup and efficiency (N > 1"
            " devices, against a different 1-device run of the same recipe, dataset, model, "
            "engine, GPU model, batch and image size), best validation accuracy, EUR total and "
            "per epoch; then totals, notes (runs skipped and why) and the price and rate "
            "provenance.",
        ),
    },
    "Planning and prices": {
        "plan": (
            "plan.plan",
            "Every instance type x GPUs x hosts x region x market x backend that can run "
            "RECIPE's engine: predicted time and euros, ranked by euros with the Pareto front "
            "marked; the cheapest meeting --deadline and the fastest within --budget named on "
            "top with their `finetune launch` command (times within 10 % or a minute of the "
            "quickest are a tie, which the cheaper wins).",
        ),
        "sweep": (
            "sweep.sweep",
            "Run RECIPE once per grid cell, with batch and learning rate derived per cell "
            "(linear scaling rule) and a euro estimate each; refuse above --max-eur.",
        ),
        "prices": (
            "prices.app",
            "GPU instances with their hourly price in EUR, on-demand and spot, like `sky gpus "
            "list`.",
        ),
    },
    "Using a model": {
        "predict": (
            "predict.predict",
            "Classify images with a run's model, applying exactly the validation preprocessing "
            "the run recorded (preprocessing.json), in batches, with the run's engine.",
        ),
        "export": (
            "predict.export",
            "Export a run's model with its class map (classes.json) and preprocessing "
            '(preprocessing.json): ONNX (model.onnx, input "data" N x 3 x S x S) for the torch '
            "engine, the symbol + params pair for MXNet.",
        ),
    },
    "Settings and AWS set-up": {
        "recipes": ("recipes.app", "Training recipes (YAML): what to train and how, per device."),
        "config": (
            "config.app",
            "Settings (region, bucket, role_arn, profile, data_dir, cache_dir): show where each "
            "value comes from, or set one in the config file.",
        ),
        "check": (
            "check.check",
            "Check credentials, region, bucket, image, run role and GPU quota, with each fix.",
        ),
        "infra": ("infra.app", "The AWS stack for SageMaker runs: print or deploy it."),
        "image": ("image.app", "The training image: build and push it to ECR."),
        "cleanup": (
            "cleanup.cleanup",
            "Find instances, open spot requests, SageMaker jobs and run roles of finetune that "
            "no live run owns (a launch killed before its backend answered counts as dead after "
            "15 minutes), and remove them (terminate, cancel, stop, delete).",
        ),
    },
    "Try it": {
        "demo": (
            "demo.demo",
            "The whole product offline, no AWS, no GPU: two generated image sets prepared into "
            "RecordIO, ResNet-18 pre-trained on one, fine-tuned on the other (head replaced) and"
            " trained from scratch, both learning curves side by side (table and PNG), then the"
            " cost report.",
        ),
    },
}
COMMANDS = {name: entry for panel in PANELS.values() for name, entry in panel.items()}


class _Group(TyperGroup):
    """The root group: loads each command on demand (click's lazy group), lists them by
    PANELS, and turns a FinetuneError anywhere below into its message on stderr and its exit
    code."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = _load(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx, args):
        # typer draws "Did you mean" from the commands loaded so far: here, from all of them
        name = args[0] if args else ""
        if name[:1].isalnum() and name not in COMMANDS and self.suggest_commands:
            close = get_close_matches(name, COMMANDS)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {', '.join(map(repr, close))}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx, formatter):
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        for panel, commands in PANELS.items():
            with formatter.section(panel):
                formatter.write_dl(
                    [(name, _short(text, limit)) for name, (_, text) in commands.items()]
                )

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except FinetuneError as exc:
            # a message may quote a remote string (an AWS error, a FailureReason): inert
            typer.echo(f"Error: {printable(str(exc))}", err=True)
            raise typer.Exit(exc.exit_code) from None


def _load(name: str):
    """Command ``name`` as click sees it: its module imported, registered as the root would."""
    module, attribute = COMMANDS[name][0].split(".")
    target = getattr(importlib.import_module(f"finetune.cli.{module}"), attribute)
    holder = typer.Typer(  # what the root's own registration would carry over
        rich_markup_mode=app.rich_markup_mode,
        pretty_exceptions_short=app.pretty_exceptions_short,
        suggest_commands=app.suggest_commands,
    )
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    return typer.main.get_group(holder).commands[name]


def _short(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` as click shortens a command's help for a listing."""
    return TyperCommand(None, help=text).get_short_help_str(limit)


app = typer.Typer(
    cls=_Group,
    name="finetune",
    help="Fine-tune pretrained ResNets on your own images, locally or on AWS GPUs, "
    "and know what it cost in euros.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="No live progress bars or per-epoch lines (results and errors still print).",
    ),
) -> None:
    """Fine-tune pretrained ResNets on your own images, and know what it cost in euros."""
    set_quiet(quiet)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    finally:
        # the command has ended (or was interrupted): a Ctrl-C pressed again now must not
        # break the interpreter's shutdown with a traceback from an atexit handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)
