#!/usr/bin/env bash
# Set up .venv and run the whole test suite: lint, format check, type check (mypy), then pytest.
# Tests run in parallel, one pytest-xdist worker per CPU plus one (each worker has its own session
# fixtures: moto server, temp dirs, data dir). The extra worker fills the time tests spend
# waiting (sleeps and polls, subprocess starts, trainers being stopped): with one worker per CPU,
# /proc/stat counted the 2 cores 21 % idle over a run; with three workers, 1 %, and the pytest
# wall fell 901 -> 742 s at the same CPU-seconds (2026-11-27). Extra arguments go to pytest
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
