#!/usr/bin/env bash
# Creates (or refreshes) the project virtualenv in .venv: the pinned versions of
# requirements.txt, then nmt_tf itself installed from this checkout (editable, so that
# `.venv/bin/nmt-tf` and `import nmt_tf` run the code of the working tree).
# Idempotent: re-installs only when requirements.txt or pyproject.toml changed since the last
# install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# pip install ARGS, tried up to three times: a registry that fails for a moment (no versions
# found, a connection reset) is asked again after a pause.
pip_install() {
  local attempt
  for attempt in 1 2 3; do
    if .venv/bin/python -m pip install -q "$@"; then
      return 0
    fi
    if [ "$attempt" -lt 3 ]; then
      echo "setup_env.sh: pip install $* failed (attempt $attempt of 3); retrying in" \
        "$((attempt * 30)) s" >&2
      sleep $((attempt * 30))
    fi
  done
  echo "error: pip install $* failed three times: check the network or the package index" \
    "(pip config list), then rerun" >&2
  return 1
}
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || [ ! -x .venv/bin/nmt-tf ]; then
  pip_install --upgrade pip
  pip_install -r requirements.txt
  if ! .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . \
      > .venv/install.log 2>&1; then
    cat .venv/install.log >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
# The compiled GRU cell (nmt_tf/layers/kernels/compiled.py): built once per TensorFlow version
# and CPU into ~/.cache/nmt_tf; where it cannot be, training runs on plain ops and says so.
TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/python -m nmt_tf.layers.kernels.compiled
