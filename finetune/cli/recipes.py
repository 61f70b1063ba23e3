"""`finetune recipes`: list, show and validate training recipes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from finetune.cli._options import Format, Help, Json, Overrides, typed_flags
from finetune.cli._records import record_csv
from finetune.cli._render import echo_json, emit_table, output_format
from finetune.engines import timmzoo
from finetune.errors import ConfigError, require_module
from finetune.recipes.loading import available, dump_yaml, load_recipe, validate_many

app = typer.Typer(
    help="Training recipes (YAML): what to train and how, per device. "
    "Validate them before any money is spent.",
    no_args_is_help=True,
)


@app.command("list")
def list_recipes(fmt: Format = "table", as_json: Json = False) -> None:
    """List the recipes reachable by name (./recipes first, then the bundled ones)."""
    fmt = output_format(fmt, as_json)
    found = available()
    loaded = dict(validate_many(found))
    rows: list[dict[str, Any]] = []
    for name, f in found.items():
        loaded_ = loaded[name]
        recipe = None if isinstance(loaded_, Exception) else loaded_  # None: invalid
        rows.append(
            {
                "name": name,
                "origin": f.origin,
                "path": str(f.path),
                "model": recipe.model.name if recipe else None,
                "epochs": recipe.schedule.epochs if recipe else None,
                "description": recipe.description if recipe else "INVALID: run `recipes validate`",
            }
        )
    cells = [[r["name"], r["origin"], r["model"] or "?", r["description"]] for r in rows]
    emit_table(fmt, ["name", "origin", "model", "description"], cells, rows)


@app.command("show")
@typed_flags
def show(
    name: str = typer.Argument(..., help="Recipe name (see `recipes list`) or path to a YAML."),
    overrides: Annotated[Overrides, Help("KEY=VALUE overrides, e.g. epochs=2.")] = None,
    fmt: Annotated[Format, Help("table (YAML), json or csv (key,value).")] = "table",
    as_json: Json = False,
) -> None:
    """Print a recipe with every default spelled out (and overrides applied)."""
    fmt = output_format(fmt, as_json)
    recipe = load_recipe(name, overrides or ())
    if fmt == "json":
        echo_json(recipe.model_dump(mode="json"))
    elif fmt == "csv":
        typer.echo(record_csv(recipe.model_dump(mode="json")), nl=False)
    else:
        typer.echo(dump_yaml(recipe), nl=False)


@app.command("validate")
def validate(
    paths: list[Path] = typer.Argument(
        None, help="Recipe files or names to check. Default: every recipe reachable by name."
    ),
) -> None:
    """Check recipes without running anything; exit non-zero if any is invalid."""
    targets = [str(p) for p in paths] if paths else list(available())
    if not targets:
        typer.echo("No recipes found.", err=True)
        raise typer.Exit(ConfigError.exit_code)
    bad = 0
    for target, result in validate_many(targets):
        if isinstance(result, ConfigError):
            bad += 1
            typer.echo(f"FAIL {target}\n  {result}", err=True)
        else:
            typer.echo(f"ok   {target} ({result.name})")
    if bad:
        typer.echo(f"{bad} of {len(targets)} recipe(s) invalid.", err=True)
        raise typer.Exit(ConfigError.exit_code)


@app.command("models")
def models(
    filter_: Annotated[
        str, typer.Option("--filter", help="Only names containing this, e.g. convnext.")
    ] = "",
    pretrained: Annotated[
        bool, typer.Option("--pretrained", help="Every weight tag (timm/<model>.<tag>).")
    ] = False,
    fmt: Format = "table",
) -> None:
    """List timm's models a torch recipe can name (model.name: timm/<model>[.<tag>]), with
    parameters, default input size and weights' tag; from timm's registry, nothing fetched."""
    fmt = output_format(fmt, False)
    require_module("timm", extra="torch")  # deferred: timm (and torch) only for this command
    rows = timmzoo.listing(filter_, pretrained)
    if not rows and fmt == "table":
        typer.echo(f"No timm model name contains {filter_!r}.")
        typer.echo("Try a shorter word (convnext, vit, efficientnet) or leave --filter out.")
        return
    records = [
        {"name": r.name, "parameters": r.parameters, "input_size": r.input_size,
         "tag": r.tag or None, "pretrained": r.pretrained}
        for r in rows
    ]  # fmt: skip
    cells = [
        [r.name, f"{r.parameters / 1e6:.1f}M" if r.parameters else "?", str(r.input_size),
         r.tag if r.pretrained else "(no weights)"]
        for r in rows
    ]  # fmt: skip
    emit_table(fmt, ["name", "parameters", "input_size", "tag"], cells, records)
    if fmt == "table":
        typer.echo(f"{len(rows)} model(s); name one in a torch recipe as model.name: NAME.")
