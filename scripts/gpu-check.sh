#!/usr/bin/env bash
# One command for one NVIDIA GPU: finetune's PyTorch engine end to end, nvjpeg decode, NCCL,
# telemetry and ResNet-50/-152 images/s beside their anchors, in one JSON (benchmarks/gpu_check.py
# says what each step does). Needs a CUDA build of torch + torchvision and the repository's
# requirements; nothing from the network.
#
#   bash scripts/gpu-check.sh                  # on the GPU machine
#   bash scripts/gpu-check.sh --out check.json
#   bash scripts/gpu-check.sh --cpu-dry        # the same steps on a CPU, toy sizes
#
# PYTHON picks the interpreter (default: .venv/bin/python when there is one, else python3).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # --out stays relative to where you are
exec "$PYTHON" -m benchmarks.gpu_check "$@"
