#!/usr/bin/env bash
# The one deliberate refresh of every lock (needs the package index; nothing else writes them):
#   bash scripts/lock.sh                          # inputs changed: keep every pin that still fits
#   bash scripts/lock.sh --upgrade-package NAME   # move NAME (repeatable) to its newest allowed
#   bash scripts/lock.sh --upgrade                # move everything
# It resolves requirements/dev.lock with uv and derives the other locks from its pins
# (scripts/lock.py says which and how); then `bash scripts/setup.sh` installs the new lock and
# `git diff requirements finetune/backends` shows every version that moved.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
UV=.venv/bin/uv
if [[ ! -x "$UV" ]]; then
  # no dev environment yet: uv at the dev lock's own pin and hashes, in a venv of its own
  [[ -x .venv-lock/bin/python ]] || "$PY" -m venv .venv-lock
  awk '/^uv==/{p=1} p{print} p && !/\\$/{exit}' requirements/dev.lock > .venv-lock/uv.txt
  .venv-lock/bin/python -m pip install -q --disable-pip-version-check --require-hashes \
    --no-deps -r .venv-lock/uv.txt
  UV=.venv-lock/bin/uv
fi
exec "$PY" scripts/lock.py --uv "$UV" "$@"
