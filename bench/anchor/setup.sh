#!/usr/bin/env bash
# Creates the Joey NMT 2.3.0 anchor virtualenv outside the project (idempotent).
# Usage: bash bench/anchor/setup.sh [ANCHOR_DIR]   (default: $ANCHOR_DIR, else ../anchor beside
# the project)
set -euo pipefail
ANCHOR_DIR="${1:-${ANCHOR_DIR:-$(cd "$(dirname "$0")/../../.." && pwd)/anchor}}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
TORCH_WHEEL="${TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}"
VENV="$ANCHOR_DIR/venv"
PIP="$VENV/bin/python -m pip"

mkdir -p "$ANCHOR_DIR"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version'

installed() { $PIP show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }

# torch first, CPU build, so that joeynmt's requirement is already met (no CUDA wheel).
if [ "$(installed torch)" != "2.13.0+cpu" ]; then
  $PIP install "torch==2.13.0" || $PIP install "$TORCH_WHEEL"
fi
# sentencepiece 0.1.99: Joey 2.3's tokenizer calls SentencePieceProcessor.SetVocabulary,
# which newer releases (0.2.x) dropped. joeynmt 2.3.0 also imports importlib_metadata
# (helpers.py) without declaring it.
[ "$(installed joeynmt)" = "2.3.0" ] || $PIP install "joeynmt==2.3.0" "sentencepiece==0.1.99"
[ "$(installed sentencepiece)" = "0.1.99" ] || $PIP install "sentencepiece==0.1.99"
[ -n "$(installed importlib_metadata)" ] || $PIP install importlib_metadata

version="$(installed torch)"
if [ "$version" != "2.13.0+cpu" ]; then
  echo "expected torch 2.13.0+cpu in $VENV, found '$version'" >&2
  exit 1
fi
echo "anchor venv ready: $VENV (torch $version, joeynmt $(installed joeynmt))"
