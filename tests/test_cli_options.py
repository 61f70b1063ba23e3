"""Launch's backend flags and the backends' Options models are held together here, so a renamed
field or a misspelt key fails this test instead of a user's launch; and a flag the chosen
backend does not take is refused at once, naming the backends that take it."""

from __future__ import annotations

import typing
from typing import Annotated, TypeVar

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from finetune.backends import NAMES, backend_class, flag
from finetune.cli import app
from finetune.cli._launch_request import TO_BACKEND, LaunchFlags
from finetune.cli._options import Help, fields_marked, flag_set, typed_flags


def _options_fields() -> dict[str, set[str]]:
    """backend name -> the fields of its Options model (what options_for accepts by name)."""
    return {name: set(backend_class(name).Options.model_fields) for name in NAMES}


def _unknown(kind) -> set[str]:
    """The fields of flag set ``kind`` handed to the backends that no backend's Options has."""
    known = set().union(*_options_fields().values())
    return set(fields_marked(kind, TO_BACKEND)) - known


def _launch_params() -> dict[str, object]:
    root = get_command(app)
    launch = root.get_command(typer.Context(root, info_name="finetune"), "launch")
    return {p.name: p for p in launch.params}


def test_every_backend_flag_launch_hands_over_is_a_field_of_a_backends_options():
    handed = set(LaunchFlags.backend_options())
    params = _launch_params()
    assert handed and handed <= set(params)  # each is a flag of the command, by that name
    assert all(flag(name) in params[name].opts for name in handed)  # spelt as errors spell it
    assert _unknown(LaunchFlags) == set()
    # every option a backend takes is a flag, and no flag is kept from the backends
    assert set().union(*_options_fields().values()) == handed
    request = LaunchFlags().request("a-recipe", ["epochs=1"])
    assert set(request.options) == handed


def test_a_misspelt_or_renamed_key_is_caught():
    @flag_set
    class Misspelt:
        regoin: Annotated[str | None, typer.Option(help="x"), TO_BACKEND] = None
        backend: Annotated[str | None, typer.Option(help="x")] = None  # not handed over

    assert _unknown(Misspelt) == {"regoin"}


def _foreign() -> list[tuple[str, str]]:
    """(flag name, backend that does not take it) for every backend flag of launch."""
    fields = _options_fields()
    return [(f, n) for f in LaunchFlags.backend_options() for n in NAMES if f not in fields[n]]


@pytest.mark.parametrize(("name", "backend"), _foreign())
def test_a_flag_the_backend_does_not_take_is_refused_naming_its_owners(name, backend):
    param = _launch_params()[name]
    given = [param.opts[0]] if param.is_flag else [param.opts[0], "1"]
    res = CliRunner().invoke(app, ["launch", "a-recipe", "--backend", backend, *given, "--dry-run"])
    owners = ", ".join(n for n, f in _options_fields().items() if name in f)
    assert res.exit_code == 2, res.output
    assert f"{flag(name)} does not apply to --backend {backend}" in res.output
    assert f"({flag(name)}: {owners})" in res.output and "To fix:" in res.output


@flag_set
class Where:  # a flag set is named where its commands are: at module level
    zone: Annotated[str | None, typer.Option(help="Zone.")] = None
    hosts: Annotated[int, typer.Option(min=1, help="Hosts.")] = 1


@flag_set
class Twice:
    loud: Annotated[bool, typer.Option("--loud", help="Loud.")] = False


def test_a_flag_set_is_its_fields_for_typer_and_one_value_for_the_command():
    got = []
    toy = typer.Typer(rich_markup_mode=None)

    @toy.command()
    @typed_flags
    def run(
        name: Annotated[str, typer.Argument(help="Name.")],
        *,
        where: Where,
        loud: Annotated[bool, typer.Option("--loud", help="Loud.")] = False,
    ):
        got.append((name, where, loud))

    res = CliRunner().invoke(toy, ["n", "--hosts", "3", "--loud"])
    assert res.exit_code == 0, res.output
    assert got == [("n", Where(zone=None, hosts=3), True)]
    shown = CliRunner().invoke(toy, ["--help"]).output
    assert shown.index("--zone") < shown.index("--hosts") < shown.index("--loud")
    assert CliRunner().invoke(toy, ["n", "--hosts", "0"]).exit_code == 2  # min=1 holds


def test_a_field_that_repeats_a_parameter_is_refused():
    def command(*, twice: Twice, loud: bool = False): ...

    with pytest.raises(TypeError, match="repeats a parameter"):
        typed_flags(command)


T = TypeVar("T")
Zone = Annotated[T, typer.Option("--zone", help="Zone (default: the first).")]


def test_a_flag_declared_once_takes_its_help_and_type_where_used():
    toy = typer.Typer(rich_markup_mode=None)
    got = []

    @toy.command("one")
    @typed_flags
    def one(zone: Annotated[Zone[str | None], Help("The zone to price.")] = None):
        got.append(zone)

    @toy.command("many")
    def many(zone: Zone[list[str] | None] = None):
        got.append(zone)

    runner = CliRunner()
    assert "The zone to price." in runner.invoke(toy, ["one", "--help"]).output
    assert "Zone (default: the first)." in runner.invoke(toy, ["many", "--help"]).output
    assert runner.invoke(toy, ["one", "--zone", "a"]).exit_code == 0
    assert runner.invoke(toy, ["many", "--zone", "a", "--zone", "b"]).exit_code == 0
    assert got == ["a", ["a", "b"]]

    def loose(zone: Annotated[str, Help("Nothing to put it in.")] = ""): ...

    with pytest.raises(TypeError, match="needs one typer Option or Argument"):
        typed_flags(loose)


def _every_command(cmd, parent=None, name="finetune"):
    yield name, cmd
    if hasattr(cmd, "list_commands"):
        ctx = typer.Context(cmd, info_name=name, parent=parent)
        for sub in cmd.list_commands(ctx):
            yield from _every_command(cmd.get_command(ctx, sub), ctx, sub)


def test_every_help_reaches_its_flag():
    """A command that gives a flag its own Help is decorated with typed_flags (else Typer
    would show the alias's help, or none, and say nothing)."""
    for name, cmd in _every_command(get_command(app)):
        if cmd.callback is None:
            continue
        function = cmd.callback.__wrapped__  # the function typer was given
        hints = typing.get_type_hints(function, include_extras=True)
        left = [
            p
            for p, h in hints.items()
            if any(isinstance(m, Help) for m in getattr(h, "__metadata__", ()))
        ]
        assert left == [], f"`{name}`: Help of {left} not applied (@typed_flags missing)"
