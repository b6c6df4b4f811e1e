#!/usr/bin/env bash
# Line coverage of nmt_tf/ by the whole suite: both stages of scripts/run_tests.sh, with the
# Python processes that the tests start (the commands, the servers, the exports' fresh
# processes). Prints the report per file and the total; `--html` also writes htmlcov/.
# Measured code runs slower: use scripts/run_tests.sh for the suite's time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
bash scripts/setup_browser.sh
.venv/bin/python -m pip install -q coverage==7.18.0 pytest-cov==7.1.0
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
# One data file for every process, wherever it runs.
export COVERAGE_FILE=$PWD/.coverage
rm -f .coverage .coverage.*
NMT_TF_COMPILED_CELL=0 .venv/bin/python -m pytest -q -n 2 --dist loadscope -m "not slow or variants" \
  --cov --cov-append --cov-report= \
  tests/test_models.py tests/test_layers_compiled_cell.py tests/test_encoders.py
.venv/bin/python -m pytest -q -n 2 --dist loadscope --cov --cov-append --cov-report= \
  tests experiments || echo "coverage.sh: some tests failed; the figure below counts the run as it went" >&2
# The data of processes that ended after pytest-cov combined (the export loaders, at exit),
# added to the whole; --append keeps what is there.
.venv/bin/python -m coverage combine --append -q 2>/dev/null || true
.venv/bin/python -m coverage report
if [ "${1:-}" = "--html" ]; then
  .venv/bin/python -m coverage html -q && echo "htmlcov/index.html"
fi
