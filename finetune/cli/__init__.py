"""The `finetune` command line: Typer only. Each command parses, calls one library function
and renders; heavy libraries are imported inside the commands so `--help` stays instant."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from finetune.errors import FinetuneError

# `finetune --help` lists the commands in the order of the work, in named groups (plain
# click formatting: rich's help panels would import rich and change every help page)
PANELS: dict[str, tuple[str, ...]] = {
    "Data": ("prepare", "test-io"),
    "Training": ("launch", "runs", "cost-report"),
    "Planning and prices": ("plan", "sweep", "prices"),
    "Using a model": ("predict", "export"),
    "Settings and AWS set-up": ("recipes", "config", "check", "infra", "image", "cleanup"),
    "Try it": ("demo",),
}
ORDER = tuple(name for names in PANELS.values() for name in names)


class _Group(TyperGroup):
    """Turns a FinetuneError anywhere below into its message on stderr and its exit code;
    lists the top-level commands by PANELS."""

    def list_commands(self, ctx):
        names = super().list_commands(ctx)
        if ctx.parent is not None:  # only the root group is ordered by the work
            return names
        return sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))

    def format_commands(self, ctx, formatter):
        if ctx.parent is not None:
            return super().format_commands(ctx, formatter)
        shown = [(n, self.get_command(ctx, n)) for n in self.list_commands(ctx)]
        shown = [(n, c) for n, c in shown if c is not None and not c.hidden]
        limit = formatter.width - 6 - max(len(n) for n, _ in shown)
        for panel, names in [*PANELS.items(), ("Other", ())]:
            rows = [
                (n, c.get_short_help_str(limit))
                for n, c in shown
                if n in names or (panel == "Other" and n not in ORDER)
            ]
            if rows:
                with formatter.section(panel):
                    formatter.write_dl(rows)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except FinetuneError as exc:
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None


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


def _register() -> None:
    """Every command; `finetune --help` orders and groups them by PANELS."""
    from finetune.cli import (
        check,
        cleanup,
        config,
        cost_report,
        demo,
        image,
        infra,
        launch,
        plan,
        predict,
        prepare,
        prices,
        recipes,
        runs,
        sweep,
        testio,
    )

    app.command("demo")(demo.demo)
    app.add_typer(prepare.app, name="prepare")
    app.command("test-io")(testio.test_io)
    app.add_typer(recipes.app, name="recipes")
    app.command("plan")(plan.plan)
    app.command("launch")(launch.launch)
    app.command("sweep")(sweep.sweep)
    app.add_typer(runs.app, name="runs")
    app.command("predict")(predict.predict)
    app.command("export")(predict.export)
    app.command("cost-report")(cost_report.cost_report)
    app.add_typer(prices.app, name="prices")
    app.add_typer(config.app, name="config")
    app.command("check")(check.check)
    app.add_typer(infra.app, name="infra")
    app.add_typer(image.app, name="image")
    app.command("cleanup")(cleanup.cleanup)


def _print_version(value: bool) -> None:
    if value:
        from finetune import __version__

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
    from finetune.cli._render import set_quiet

    set_quiet(quiet)


_register()


def main() -> None:
    """Console-script entry point."""
    import signal

    try:
        app()
    finally:
        # the command has ended (or was interrupted): a Ctrl-C pressed again now must not
        # break the interpreter's shutdown with a traceback from an atexit handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)
