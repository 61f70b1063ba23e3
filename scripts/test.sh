#!/usr/bin/env bash
# Set up .venv and run the whole test suite: lint, format check, type check (mypy), then pytest.
# Tests run in parallel, one pytest-xdist worker per CPU plus one (each worker has its own session
# fixtures: moto server, temp dirs, data dir): the extra one fills the time tests spend waiting
# (docs/decisions/009-test-workers-and-bytecode.md). Extra arguments go to pytest
# (`-n 0`: serial; a later -n wins).
# The long tests come first (tests/conftest.py) and --dist worksteal lets an idle worker take
# half of the other's queue, so neither waits on a long test the other started last.
# --quick (first argument): lint, then only the tests marked neither slow (real trainings of
# more than a few seconds) nor emulation (multi-step cloud flows on moto, spawned trainers):
# under 2 minutes on 2 cores. CI (.ci/run) runs everything.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
if [[ "${1:-}" == "--quick" ]]; then
    quick=(-m "not slow and not emulation")
    shift
fi
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # pyproject.toml [tool.mypy]: the whole package, strict on finetune.estimate
workers=$(($(nproc) + 1))  # nproc: the CPUs this process may use
exec .venv/bin/python -m pytest -q -n "$workers" --dist worksteal "${quick[@]}" "$@"
