#!/usr/bin/env bash
# Set up .venv and run the main job on its embedded default: an offline end-to-end demo on
# this machine (generated images -> RecordIO -> ...), no AWS and no GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/finetune demo "$@"
