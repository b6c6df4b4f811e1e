#!/usr/bin/env bash
# Trains, evaluates and records the rows of the equal-step comparison on Multi30k de->en that
# have no record yet, one after the other (each about 75 minutes on 2 CPU cores). Run it
# again after an interruption: training resumes exactly where it stopped.
#   bash experiments/multi30k/run_rows.sh            # every row
#   ROWS="sar_avg sar_cavg" bash experiments/multi30k/run_rows.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
STEPS=(--config.train.steps=2500 --config.train.max_minutes=0)

wanted() { [[ -z "${ROWS:-}" || " ${ROWS} " == *" $1 "* ]]; }

if wanted cgru; then
  "$PYTHON" experiments/multi30k/study.py row cgru_de-en_2500steps \
    --config=multi30k:cgru --keep_attention -- "${STEPS[@]}"
fi
for model in sar_avg sar_cavg self_attentive_rnn; do
  if wanted "$model"; then
    "$PYTHON" experiments/multi30k/study.py row "${model}_de-en_2500steps" \
      --config="multi30k:${model}" --baseline=cgru_de-en_2500steps -- "${STEPS[@]}"
  fi
done
"$PYTHON" experiments/multi30k/study.py report
