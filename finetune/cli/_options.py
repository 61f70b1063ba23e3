"""Flags declared once: typed ``Annotated`` aliases that several commands share, and flag sets.

A flag set is a frozen dataclass whose fields are flags (each an ``Annotated`` type carrying
its ``typer.Option`` or ``typer.Argument``, with the default after ``=``). A command decorated
with ``takes_flag_sets`` names the set once, as one parameter; Typer sees every field as a
flag of its own, in the set's order at that place, and the command receives the set, filled.
So a group of flags travels as one typed value -- to the helper that turns it into a library
request -- instead of as a dozen positional arguments, and a test can ask a set which of its
fields are flags of which kind (``fields_marked``). Declare a set at module level, as its
commands are: its annotations are resolved in its module.

Only typer and the standard library are imported here: ``finetune --help`` stays instant.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer

_FLAG_SET = "__flag_set__"

# -- aliases shared by several commands ------------------------------------------------------
Recipe = Annotated[str, typer.Argument(help="Recipe name or path to a recipe YAML.")]
Dataset = Annotated[
    str | None, typer.Option(help="Prepared dataset: folder or name (default: recipe's).")
]
# the one output convention (cli/_render.py): --format table|json|csv, and its old spelling
Format = Annotated[str, typer.Option("--format", help="table, json or csv (any case).")]
Json = Annotated[bool, typer.Option("--json", hidden=True, help="Deprecated: --format json.")]


# -- flag sets -------------------------------------------------------------------------------
@typing.dataclass_transform(kw_only_default=True, frozen_default=True)
def flag_set(cls: type) -> type:
    """Class decorator: ``cls`` as a frozen, keyword-only dataclass of flags."""
    cls = dataclasses.dataclass(frozen=True, kw_only=True)(cls)
    setattr(cls, _FLAG_SET, True)
    return cls


def _is_flag_set(hint: Any) -> bool:
    return isinstance(hint, type) and getattr(hint, _FLAG_SET, False)


def _parameters(kind: type) -> list[inspect.Parameter]:
    """The fields of flag set ``kind`` as the command parameters Typer reads, in order."""
    hints = typing.get_type_hints(kind, include_extras=True)
    return [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=hints[f.name],
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


def takes_flag_sets(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for a Typer command: each parameter typed with a flag set becomes that set's
    fields for Typer (help, parsing and order as if written out there); the command is
    called with the set filled from them. A field named like another parameter is refused."""
    hints = typing.get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    sets: dict[str, tuple[type, tuple[str, ...]]] = {}
    for p in inspect.signature(command).parameters.values():
        hint = hints.get(p.name, p.annotation)
        if not _is_flag_set(hint):
            parameters.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hint))
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
