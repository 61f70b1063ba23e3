#!/usr/bin/env bash
# Create (or update) .venv with finetune, the MXNet engine and the test tools.
# Needs only Python 3.11 and pip. Safe to run again: pip skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  for c in python3.11 python3 python; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PY="$c"; break
    fi
  done
fi
if [[ -z "$PY" ]]; then
  echo "error: Python 3.11 is required (MXNet 1.9.1 needs numpy<1.24, which has no wheels for newer Pythons)." >&2
  echo "To fix: install Python 3.11, or set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q -c requirements/constraints.txt)
"${PIP[@]}" --upgrade pip >/dev/null 2>&1 || true
"${PIP[@]}" -e ".[train,aws,dev]"
# gluoncv declares opencv-python, whose current release needs numpy>=2 and would break
# mxnet; its real needs are in the [train] extra, so install it without dependencies.
"${PIP[@]}" --no-deps "gluoncv==0.10.5.post0"
.venv/bin/python -c "import mxnet, gluoncv, numpy; assert numpy.__version__.startswith('1.23')" 2>/dev/null \
  || { echo "error: the MXNet engine does not import in .venv" >&2; exit 1; }
echo "finetune is installed in .venv (activate with: source .venv/bin/activate)" >&2
