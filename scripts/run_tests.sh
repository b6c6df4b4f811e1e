#!/usr/bin/env bash
# Sets up .venv and runs the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
bash scripts/setup_browser.sh  # Debian's Chromium, for the page's test
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
# The models' tests without the compiled GRU cell first: training then runs the plain ops, as
# on a machine where the cell cannot be built. Then the whole suite, with the cell.
NMT_TF_COMPILED_CELL=0 .venv/bin/python -m pytest -q -n 2 --dist loadscope -m "not slow or variants" \
  tests/test_models.py tests/test_layers_compiled_cell.py tests/test_encoders.py
# Two workers; each test class goes whole to one of them, so that a class's shared fixture
# (setUpClass: a trained run, an installed wheel) is built once (tests/conftest.py puts the
# longest classes first). The 15 slowest tests are listed at the end.
exec .venv/bin/python -m pytest -q -n 2 --dist loadscope --durations=15 tests experiments "$@"
