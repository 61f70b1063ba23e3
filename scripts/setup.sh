#!/usr/bin/env bash
# Create (or update) .venv with finetune, both engines (MXNet, PyTorch) and the test tools, and
# .venv-tools with the security scanners (checkov, bandit) and the AWS CLI -- each exactly as its
# lock says (requirements/dev.lock, requirements/tools.lock: every package ==-pinned and hashed),
# installed with pip --require-hashes --no-deps, so nothing is resolved at install time and every
# machine gets the same files on any day. `bash scripts/lock.sh` refreshes the locks.
# Needs only Python 3.11 and pip. Safe to run again: when .venv was set up from the same locks,
# this script, the same Python and checkout path, it does not run pip at all (works offline).
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
  echo "error: Python 3.11 is required (the locks are for CPython 3.11: MXNet 1.9.1 needs numpy<1.24, which has no wheels for newer Pythons)." >&2
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
    cat requirements/dev.lock requirements/tools.lock scripts/setup.sh
    "$py" -c 'import sys; print(sys.version)'
    pwd -P
  } | sha256sum | cut -d' ' -f1
}
# finetune's own bytecode: pip compiles every package but this editable one, and where
# PYTHONDONTWRITEBYTECODE is set (CI) each process would compile it (docs/decisions/009).
compile_ours() { .venv/bin/python -m compileall -q finetune >/dev/null; }

want="$(inputs_hash)"
if [[ -x .venv/bin/python && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] \
  && [[ -x .venv-tools/bin/checkov && -x .venv-tools/bin/bandit ]] \
  && .venv/bin/python -c 'import finetune' 2>/dev/null; then
  compile_ours
  echo "finetune is already installed in .venv (locks unchanged; pip skipped)" >&2
  exit 0
fi

# entries NAME... of a lock (with their hash lines), as a requirements file on stdout
pick() {
  local lock="$1"; shift
  local names="$*"
  awk -v names=" $names " '
    /^[A-Za-z0-9]/ { split($0, a, "=="); p = index(names, " " a[1] " ") > 0 }
    p && !/^#/ { print }' "$lock"
}
install_locked() {  # VENV LOCK: pip, setuptools and wheel first, then the rest without isolation
  local venv="$1" lock="$2" tmp
  tmp="$(mktemp)"
  local pip=("$venv/bin/python" -m pip install --disable-pip-version-check -q --no-deps --require-hashes)
  pick "$lock" pip setuptools wheel > "$tmp"
  [[ -s "$tmp" ]] && "${pip[@]}" -r "$tmp"
  # an sdist in the lock (sagemaker-training) builds with the venv's own setuptools: a build
  # environment would resolve its build requirements from the index
  "${pip[@]}" --no-build-isolation -r "$lock"
  rm -f "$tmp"
}

[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
rm -f "$STAMP"
install_locked .venv requirements/dev.lock
.venv/bin/python -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
.venv/bin/python -c "import numpy; from finetune.train.engines.mxnet.zoo import model_zoo; model_zoo(); assert numpy.__version__.startswith('1.23')" 2>/dev/null \
  || { echo "error: the MXNet engine does not import in .venv" >&2; exit 1; }
.venv/bin/python -c "import torch, torchvision" 2>/dev/null \
  || { echo "error: the PyTorch engine does not import in .venv" >&2; exit 1; }
# The scanners live apart: checkov pins boto3/botocore versions that clash with ours.
[[ -x .venv-tools/bin/python ]] || "$PY" -m venv .venv-tools
install_locked .venv-tools requirements/tools.lock
.venv-tools/bin/checkov --version >/dev/null && .venv-tools/bin/bandit --version >/dev/null \
  || { echo "error: the security scanners do not run in .venv-tools" >&2; exit 1; }
compile_ours
inputs_hash >"$STAMP"
echo "finetune is installed in .venv (activate with: source .venv/bin/activate)" >&2
