#!/usr/bin/env bash
# Sets up .venv and runs the main job: train + evaluate + export on the built-in generated data.
# Extra arguments go to `run.py main` (e.g. --run_dir=runs/mine --config.train.steps=500).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
exec .venv/bin/nmt-tf main --run_dir=runs/quickstart "$@"
