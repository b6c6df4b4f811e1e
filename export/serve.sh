#!/usr/bin/env bash
# Serves EXPORT_DIR (default runs/quickstart/export, containing nmt/<version>/) with the
# tensorflow/serving image (TF_SERVING_IMAGE to pin a release no older than the TensorFlow
# that exported the model, 2.21): gRPC on 8500, REST on 8501. Needs docker.
set -euo pipefail
EXPORT_DIR=$(realpath "${1:-runs/quickstart/export}")
CONFIG=$(realpath "$(dirname "$0")/models.config")
exec docker run --rm -p 8500:8500 -p 8501:8501 \
  -v "$EXPORT_DIR:/models" -v "$CONFIG:/models/models.config:ro" \
  "${TF_SERVING_IMAGE:-tensorflow/serving:latest}" \
  --model_config_file=/models/models.config --allow_version_labels_for_unavailable_models
