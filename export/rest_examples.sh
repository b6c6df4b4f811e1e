#!/usr/bin/env bash
# REST calls against a running model server (export/serve.sh). Outputs: docs/EXPORT.md.
set -euo pipefail
HOST=${HOST:-http://localhost:8501}
# Greedy (serving_default).
curl -s -X POST "$HOST/v1/models/nmt:predict" -d '{
  "signature_name": "serving_default", "inputs": {"text": ["the boy helps the king", ""]}}'
# Beam search n-best lists, from version 2.
curl -s -X POST "$HOST/v1/models/nmt/versions/2:predict" -d '{
  "signature_name": "beam_search", "inputs": {"text": ["the boy helps the king"]}}'
# Scoring given translations.
curl -s -X POST "$HOST/v1/models/nmt/labels/stable:predict" -d '{
  "signature_name": "score",
  "inputs": {"source": ["the boy helps the king"], "target": ["la knabo helpas la regon"]}}'
# Model status and signatures.
curl -s "$HOST/v1/models/nmt"
curl -s "$HOST/v1/models/nmt/metadata"
