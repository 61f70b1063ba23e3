"""`finetune config`: the settings in effect and the user's config file."""

from __future__ import annotations

from typing import Annotated

import typer

from finetune import settings
from finetune.cli._options import Format, Help, Json, typed_flags
from finetune.cli._render import echo_json, emit_table, info, output_format
from finetune.settings import configfile as config

app = typer.Typer(
    help="Settings (region, bucket, role_arn, profile, data_dir, cache_dir): show where each "
    "value comes from, or set one in the config file. FINETUNE_* environment variables win "
    "over the file.",
    no_args_is_help=True,
)


@app.command("show")
def show(fmt: Format = "table", as_json: Json = False):
    """Every setting, its value and where it came from (environment, config file, default)."""
    fmt = output_format(fmt, as_json)
    entries = settings.show()
    if fmt == "json":  # the records, and which file they were read from
        echo_json({"config_file": str(config.path()), "settings": [e.__dict__ for e in entries]})
        return
    cells = [[e.key, e.value or "-", e.source] for e in entries]
    emit_table(fmt, ["key", "value", "source"], cells, [e.__dict__ for e in entries])
    exists = "" if config.path().exists() else " (not created yet)"
    info(f"Config file: {config.path()}{exists}")


# the setting both `config set` and `config unset` name
Key = Annotated[str, typer.Argument()]


@app.command("set")
@typed_flags
def set_(
    key: Annotated[Key, Help("A setting, e.g. region, bucket, role_arn, data_dir.")],
    value: str = typer.Argument(..., help="Its value (checked before the file is written)."),
) -> None:
    """Write KEY = VALUE into the config file (created if needed)."""
    file = settings.set_value(key, value)
    info(f"Set {settings.check_key(key)} in {file}.")


@app.command("unset")
@typed_flags
def unset(key: Annotated[Key, Help("The setting to remove from the config file.")]) -> None:
    """Remove KEY from the config file (its default, or the environment, applies again)."""
    file = settings.set_value(key, None)
    info(f"Removed {settings.check_key(key)} from {file}.")
