#!/usr/bin/env bash
# One command for one NVIDIA GPU: finetune's PyTorch engine end to end, nvjpeg decode, NCCL,
# telemetry and ResNet-50/-152 images/s beside their anchors, in one JSON (benchmarks/gpu_check.py
# says what each step does). Needs a CUDA build of torch + torchvision; nothing from the network.
# Built to run unattended on a lent machine in <= 8 minutes (--budget-s, default 450 s, skips
# and names a costly step that would end past it); the JSON is rewritten after every step, so
# a run cut short still leaves what it measured.
#
#   bash scripts/gpu-check.sh                  # on the GPU machine: $OUT/gpu-check.json when
#                                              # OUT is set, else ./gpu-check-TIME.json
#   bash scripts/gpu-check.sh --out check.json
#   bash scripts/gpu-check.sh --cpu-dry        # the same steps on a CPU, toy sizes
#   python -m finetune.estimate.perf.measured check.json   # then: its rows into the model
#
# PYTHON picks the interpreter (default: .venv/bin/python when there is one, else python3).
# A machine without pydantic, pydantic-settings or platformdirs (the lent GPU machines have
# torch but not these, and no package index): put their wheels for its Python in a folder and
# name it in FINETUNE_WHEELS (default: shared/wheels when it exists); they are installed into
# a scratch folder for this run only (pip --no-index), nothing else changes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # --out stays relative to where you are
if ! "$PYTHON" -c "import pydantic, pydantic_settings, platformdirs" 2>/dev/null; then
  WHEELS="${FINETUNE_WHEELS:-$ROOT/shared/wheels}"
  if [[ ! -d "$WHEELS" ]]; then
    echo "pydantic, pydantic-settings or platformdirs is missing and there is no wheel folder" \
      "($WHEELS). To fix: pip install -r requirements of this repository, or put their wheels" \
      "for this Python in a folder and set FINETUNE_WHEELS to it." >&2
    exit 2
  fi
  SITE="$(mktemp -d "${TMPDIR:-/tmp}/finetune-gpu-check-site.XXXXXX")"
  trap 'rm -rf "$SITE"' EXIT
  "$PYTHON" -m pip install --quiet --no-index --find-links "$WHEELS" --target "$SITE" \
    pydantic pydantic-settings platformdirs
  export PYTHONPATH="$PYTHONPATH:$SITE"
fi
"$PYTHON" -m benchmarks.gpu_check "$@"
