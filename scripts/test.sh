#!/usr/bin/env bash
# Set up .venv and run the whole test suite: lint, format check, then pytest.
# Tests run in parallel, one pytest-xdist worker per CPU (each worker has its own session
# fixtures: moto server, temp dirs, data dir). Extra arguments go to pytest (`-n 0`: serial).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest -q -n auto --dist load "$@"
