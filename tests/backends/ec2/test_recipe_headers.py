"""Every recipe's header says the command that runs it; each one runs as written, as a
dry-run (with the AWS settings of a configured account, against moto): the cloud ones pick
their backend from the instance type, and Caltech-256 plans before it is downloaded."""

from __future__ import annotations

import shlex
import shutil

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.recipes.loading import BUILTIN_DIR


def _header_commands() -> list[tuple[str, str]]:
    found = []
    for path in sorted(BUILTIN_DIR.glob("*.yaml")):
        for line in path.read_text().splitlines():
            text = line.lstrip("#").strip()
            if line.startswith("#") and text.startswith("finetune launch "):
                found.append((path.stem, text))
    return found


COMMANDS = _header_commands()


def test_every_recipe_has_a_header_command():
    assert {name for name, _ in COMMANDS} == {p.stem for p in BUILTIN_DIR.glob("*.yaml")}


@pytest.mark.parametrize(("recipe", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_the_header_command_runs_as_written(ec2_aws, tiny_dataset, recipe, command):
    from finetune import settings

    shutil.copytree(tiny_dataset, settings.get().datasets_dir / "shapes")  # `--dataset shapes`
    argv = shlex.split(command)[1:]
    res = CliRunner().invoke(app, [*argv, "--dry-run"])
    out = " ".join(res.output.split())
    assert "Traceback" not in res.output
    if "--dataset caltech256" in command:  # not downloaded: planned from its counts
        assert "caltech256 not prepared yet" in out, res.output
        assert res.exit_code == 3 and "run `finetune prepare caltech256`" in out, res.output
    else:
        assert res.exit_code == 0, res.output
    assert ("Plan:" in res.output and "estimate" in res.output) or "--backend local" in command
