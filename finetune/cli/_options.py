"""Flags declared once: typed ``Annotated`` aliases that several commands share, and flag sets.

An alias holds a flag's name, kind and limits, and its help where its commands agree; a command
that means something of its own by it says so with ``Help``. An alias held in different types
takes its type where used: ``Annotated[Region[list[str] | None], Help("Region to price.")]``.

A flag set is a frozen dataclass of such flags, declared at module level. A command decorated
with ``typed_flags`` names a set once, as one parameter: Typer sees each field as a flag of its
own, in the set's order there, and the command receives the set filled, one typed value instead
of a dozen arguments. ``typed_flags`` also puts each ``Help`` into its flag. Only typer and the
standard library are imported here.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.models import ParameterInfo

_FLAG_SET = "__flag_set__"
T = TypeVar("T")
Option = typer.Option


@dataclasses.dataclass(frozen=True)
class Help:
    """The help of an alias's flag in one command (``typed_flags`` puts it in)."""

    text: str


# -- aliases shared by several commands ------------------------------------------------------
# (one without help is given its Help by each command: they mean different things by it)
# what to run
Recipe = Annotated[str, typer.Argument(help="Recipe name or path to a recipe YAML.")]
Overrides = Annotated[list[str] | None, typer.Argument(help="Recipe overrides as key=value.")]
Dataset = Annotated[
    str | None, Option(help="Prepared dataset: folder or name (default: recipe's).")
]
Engine = Annotated[T, Option("--engine")]
Epochs = Annotated[T, Option("--epochs", min=1)]
Classes = Annotated[T, Option("--classes", min=2)]

# where, and at what price
Backend = Annotated[T, Option("--backend")]
Region = Annotated[
    T, Option("--region", help="AWS region (default: FINETUNE_REGION, then your config).")
]
Instance = Annotated[str | None, Option("--instance")]
Spot = Annotated[bool, Option("--spot")]
SpotOrOnDemand = Annotated[T, Option("--spot/--no-spot")]  # unset (plan): both markets
Deadline = Annotated[str | None, Option("--deadline")]
Budget = Annotated[float | None, Option("--budget")]
MaxEur = Annotated[float | None, Option("--max-eur")]

# runs
RunId = Annotated[str, typer.Argument(help="Run id (or a unique prefix).")]
RecipeFilter = Annotated[str | None, Option("--recipe", help="Only runs of this recipe.")]
OlderThan = Annotated[str, Option("--older-than")]

# files
Out = Annotated[Path | None, Option("--out")]
Overwrite = Annotated[bool, Option("--overwrite")]
MaxPixels = Annotated[int, Option("--max-pixels", min=1)]
Repository = Annotated[str, Option("--repository")]

# output: the one convention (cli/_render.py): --format table|json|csv, and its old spelling
Format = Annotated[str, Option("--format", help="table, json or csv (any case).")]
Json = Annotated[bool, Option("--json", hidden=True, help="Deprecated: --format json.")]
DryRun = Annotated[bool, Option("--dry-run")]
Plot = Annotated[Path | None, Option("--plot")]


# -- flag sets -------------------------------------------------------------------------------
@typing.dataclass_transform(kw_only_default=True, frozen_default=True)
def flag_set(cls: type) -> type:
    """Class decorator: ``cls`` as a frozen, keyword-only dataclass of flags."""
    cls = dataclasses.dataclass(frozen=True, kw_only=True)(cls)
    setattr(cls, _FLAG_SET, True)
    return cls


def _is_flag_set(hint: Any) -> bool:
    return isinstance(hint, type) and getattr(hint, _FLAG_SET, False)


def _with_help(hint: Any) -> Any:
    """``hint`` with its ``Help`` put into a copy of its typer Option or Argument."""
    extras = getattr(hint, "__metadata__", ())
    said = [m.text for m in extras if isinstance(m, Help)]
    if not said:
        return hint
    infos = [m for m in extras if isinstance(m, ParameterInfo)]
    if len(infos) != 1:
        raise TypeError(f"Help({said[-1]!r}) needs one typer Option or Argument: {hint}")
    info = copy.copy(infos[0])
    info.help = said[-1]
    kept = [info if m is infos[0] else m for m in extras if not isinstance(m, Help)]
    return Annotated[(hint.__origin__, *kept)]


def _parameters(kind: type) -> list[inspect.Parameter]:
    """The fields of flag set ``kind`` as the command parameters Typer reads, in order."""
    hints = typing.get_type_hints(kind, include_extras=True)
    return [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=_with_help(hints[f.name]),
        )
        for f in dataclasses.fields(kind)
    ]


def fields_marked(kind: type, marker: object) -> tuple[str, ...]:
    """The names of flag set ``kind``'s fields whose ``Annotated`` type carries ``marker``."""
    hints = typing.get_type_hints(kind, include_extras=True)
    return tuple(
        f.name
        for f in dataclasses.fields(kind)
        if any(m is marker for m in getattr(hints[f.name], "__metadata__", ()))
    )


def typed_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for a Typer command: each parameter typed with a flag set becomes that set's
    fields for Typer (help, parsing and order as if written out there), and each ``Help`` the
    help of its flag; the command is called with the sets filled from them. A field named
    like another parameter is refused."""
    hints = typing.get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    sets: dict[str, tuple[type, tuple[str, ...]]] = {}
    for p in inspect.signature(command).parameters.values():
        hint = hints.get(p.name, p.annotation)
        if not _is_flag_set(hint):
            kind = inspect.Parameter.KEYWORD_ONLY
            parameters.append(p.replace(kind=kind, annotation=_with_help(hint)))
            continue
        fields = _parameters(hint)
        sets[p.name] = (hint, tuple(f.name for f in fields))
        parameters += fields
    names = [p.name for p in parameters]
    if len(set(names)) != len(names):
        raise TypeError(f"{command.__name__}: a flag set's field repeats a parameter: {names}")

    @functools.wraps(command)
    def run(**given: Any) -> Any:
        for name, (kind, fields) in sets.items():
            given[name] = kind(**{f: given.pop(f) for f in fields})
        return command(**given)

    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # Typer reads it
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run
