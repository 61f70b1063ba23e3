#!/usr/bin/env bash
# Create (or update) .venv with finetune, both engines (MXNet, PyTorch) and the test tools, and
# .venv-tools with the security scanners (checkov, bandit) and the AWS CLI
# (requirements/tools.txt).
# Needs only Python 3.11 and pip. Safe to run again: when .venv was set up from the same
# inputs (pyproject.toml, requirements/constraints.txt, this script, the Python version and
# the checkout's path) it does not run pip at all, so it also works offline.
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

STAMP=.venv/.finetune-setup-stamp
# The stamp is a hash of everything that decides what gets installed. It is written last,
# so an interrupted install never looks complete.
inputs_hash() {
  local py="$PY"
  [[ -x .venv/bin/python ]] && py=.venv/bin/python
  {
    cat pyproject.toml requirements/constraints.txt requirements/tools.txt scripts/setup.sh
    "$py" -c 'import sys; print(sys.version)'
    pwd -P
  } | sha256sum | cut -d' ' -f1
}
want="$(inputs_hash)"
if [[ -x .venv/bin/python && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] \
  && [[ -x .venv-tools/bin/checkov && -x .venv-tools/bin/bandit ]] \
  && .venv/bin/python -c 'import finetune' 2>/dev/null; then
  echo "finetune is already installed in .venv (inputs unchanged; pip skipped)" >&2
  exit 0
fi

[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
rm -f "$STAMP"
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q -c requirements/constraints.txt)
"${PIP[@]}" --upgrade pip >/dev/null 2>&1 || true
# The build tools live in .venv, so the editable install needs no isolated build
# environment (which would look setuptools up in an index on every run).
"${PIP[@]}" setuptools wheel
"${PIP[@]}" --no-build-isolation -e ".[train,torch,aws,dev,metrics]"
# gluoncv declares opencv-python, whose current release needs numpy>=2 and would break
# mxnet; its real needs are in the [train] extra, so install it without dependencies.
"${PIP[@]}" --no-deps "gluoncv==0.10.5.post0"
.venv/bin/python -c "import numpy; from finetune.train.engines.mxnet.zoo import model_zoo; model_zoo(); assert numpy.__version__.startswith('1.23')" 2>/dev/null \
  || { echo "error: the MXNet engine does not import in .venv" >&2; exit 1; }
.venv/bin/python -c "import torch, torchvision" 2>/dev/null \
  || { echo "error: the PyTorch engine does not import in .venv" >&2; exit 1; }
# The scanners live apart: checkov pins boto3/botocore versions that clash with ours.
[[ -x .venv-tools/bin/python ]] || "$PY" -m venv .venv-tools
.venv-tools/bin/python -m pip install --disable-pip-version-check -q -r requirements/tools.txt
.venv-tools/bin/checkov --version >/dev/null && .venv-tools/bin/bandit --version >/dev/null \
  || { echo "error: the security scanners do not run in .venv-tools" >&2; exit 1; }
inputs_hash >"$STAMP"
echo "finetune is installed in .venv (activate with: source .venv/bin/activate)" >&2
