"""Golden output per command at 80 and 120 columns: no line wider than the terminal, and one
table (one header rule, no stacked blocks) at 120 -- at 100 already for `runs list`. The
rows are the widest the commands print: the full run id, the longest built-in recipe name, a
user's longer one, 16 GPUs on two ml.p4d.24xlarge, an interrupted run beside completed ones;
Caltech-256's plan from its published counts; the whole price list."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from tests.runs.test_list_width import LONGEST_BUILTIN, USERS, _store
from tests.test_output_formats import sweep_runs, two_runs  # noqa: F401 (fixtures)


def _screen(args: list[str], columns: int, **env: str) -> list[str]:
    res = CliRunner().invoke(app, args, env={"COLUMNS": str(columns), **env})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    over = [line for line in lines if len(line) > columns]
    assert not over, f"wider than {columns}:\n" + "\n".join(over) + "\n\n" + res.stdout
    return lines


def _tables(lines: list[str]) -> int:
    """How many tables (header rules) the output stacks."""
    return sum(line.startswith("─") for line in lines)


@pytest.fixture
def ledger(two_runs):  # noqa: F811
    now = time.time()
    _store("ft-20261127-034012-ab12", LONGEST_BUILTIN, "running", now - 4000)
    _store("ft-20261127-034013-cd34", USERS, "interrupted", now - 3000, ended_at=now - 10)


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_runs_list(ledger, columns):
    lines = _screen(["runs", "list"], columns)
    if columns >= 100:
        assert _tables(lines) == 1, "\n".join(lines)
    assert sum(line.startswith("ft-") for line in lines) == 4 * _tables(lines)  # every row


@pytest.mark.parametrize("columns", [80, 120])
def test_cost_report(ledger, columns):
    lines = _screen(["cost-report"], columns)
    if columns == 120:
        assert _tables(lines) == 1, "\n".join(lines)
    # the exchange rate's source once, however many days the runs' rates span
    assert " ".join(lines).count("ECB euro foreign exchange reference rate") == 1


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("target", [[], ["--target-accuracy", "0.2"]])
def test_cost_report_of_a_sweep(sweep_runs, columns, target):  # noqa: F811
    """Every line within the width (its two optional target columns may add a block)."""
    lines = _screen(["cost-report", "--sweep", sweep_runs, *target], columns)
    assert sum(line.startswith("cpus=") for line in lines) == 2 * _tables(lines)


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("args", [[], ["--gpu", "V100", "--region", "us-east-1"]])
def test_prices(columns, args):
    lines = _screen(["prices", *args], columns)
    if columns == 120:
        assert _tables(lines) == 1, "\n".join(lines)


@pytest.mark.parametrize("columns", [80, 120])
def test_plan(columns):
    argv = ["plan", "caltech256-resnet152", "--deadline", "3h", "--budget", "40"]
    lines = _screen(argv, columns, FINETUNE_REGION="us-east-1")
    assert _tables(lines) == 1 and len(lines) <= 36, "\n".join(lines)
    explained = _screen([*argv, "--explain"], columns, FINETUNE_REGION="us-east-1")
    assert _tables(explained) == 1


@pytest.mark.parametrize("columns", [80, 120])
def test_launch_dry_run(tiny_dataset, columns):
    argv = ["launch", "smoke-resnet18", "--dataset", str(tiny_dataset), "--dry-run"]
    lines = _screen(argv, columns)
    assert lines[0].startswith("Plan:") and len(lines) <= 25, "\n".join(lines)
