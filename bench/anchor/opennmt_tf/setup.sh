#!/usr/bin/env bash
# Creates the OpenNMT-tf 2.32 anchor virtualenv outside the project (idempotent).
# Usage: bash bench/anchor/opennmt_tf/setup.sh [ANCHOR_DIR]   (default: $ANCHOR_DIR, else
# ../anchor beside the project; the venv is ANCHOR_DIR/opennmt_tf/venv)
set -euo pipefail
ANCHOR_DIR="${1:-${ANCHOR_DIR:-$(cd "$(dirname "$0")/../../../.." && pwd)/anchor}}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
VENV="$ANCHOR_DIR/opennmt_tf/venv"
PIP="$VENV/bin/python -m pip"

mkdir -p "$ANCHOR_DIR/opennmt_tf"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version'

installed() { $PIP show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }

# The CPU build of TensorFlow 2.13 (the newest that OpenNMT-tf 2.32 accepts), then OpenNMT-tf
# with its tensorflow-addons; sentencepiece for prepare.py.
[ "$(installed tensorflow-cpu)" = "2.13.1" ] || $PIP install "tensorflow-cpu==2.13.1"
[ "$(installed OpenNMT-tf)" = "2.32.0" ] || $PIP install "OpenNMT-tf==2.32.0" "sentencepiece==0.1.99"
[ -n "$(installed sentencepiece)" ] || $PIP install "sentencepiece==0.1.99"

"$VENV/bin/python" - <<'PY'
import opennmt, tensorflow as tf
assert tf.__version__ == "2.13.1", tf.__version__
assert opennmt.__version__ == "2.32.0", opennmt.__version__
print(f"anchor venv ready: tensorflow {tf.__version__}, OpenNMT-tf {opennmt.__version__}")
PY
