#!/usr/bin/env bash
# Every row of docs/RESULTS.md, one after the other (about 2 hours each, ~40 hours in all on a
# 2-core CPU), each followed by `run.py report` (which publishes the row into
# docs/results/rows/<row>/ for git and redraws docs/RESULTS.md). A row is skipped when
# runs/results/<row>/results.json exists or when a published row of that name was trained on
# this machine, its label and CPU id (budgets are wall-clock time, so rows of another machine,
# or from before CPU ids were recorded, are run again here);
# an interrupted row resumes where its last checkpoint left it (its time budget counts the
# time already spent). Rerun the same command after any stop.
#
#   bash scripts/run_results.sh            # all rows, then the report
#   bash scripts/run_results.sh --dry_run  # print the commands of the rows still to do
#   ROWS="sar_avg_de-en rnnsearch_de-en" bash scripts/run_results.sh   # only these rows
#
# A row is compared with the cgru row of its direction trained on the same machine (label and
# CPU id): without one here the script refuses it (ALLOW_NO_BASELINE=1 overrides); all rows
# run the baselines first.
#
# Data: $NMT_TF_MULTI30K_DIR (default ../shared/data/multi30k). Logs: runs/results/<row>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
DRY_RUN=0
[[ "${1:-}" == "--dry_run" ]] && DRY_RUN=1

MODELS="cgru sar_avg sar_cavg rnnsearch encdec luong memory_rnn self_attentive_rnn"
# en->de rows train for 1 hour (the word rows' configs say so too); de->en subword rows for 2.
EN_DE="--config.data.source_lang=en --config.data.target_lang=de --config.train.max_minutes=60"
LEN30="--config.pipeline.max_source_len=30 --config.pipeline.max_target_len=30"

row() {  # name -> "name|config|extra flags"
  local name="$1" model
  case "$name" in
    *_word_de-en)
      model="${name%_word_de-en}"
      if [[ "$model" == *30 ]]; then
        echo "${name}|configs/${model%30}_multi30k_word.py|${LEN30}"
      else
        echo "${name}|configs/${model%50}_multi30k_word.py|"
      fi ;;
    *_en-de) echo "${name}|configs/${name%_en-de}_multi30k.py|${EN_DE}" ;;
    *_de-en) echo "${name}|configs/${name%_de-en}_multi30k.py|" ;;
  esac
}

# The order the rows are run in (docs/RESULTS.md, "Budgets and order"): the baseline (the
# quality bar) first, then the word rows of the Bahdanau comparison, the self-attentive
# de->en rows (memory RNN and self-attentive RNN first: they have no row on any machine), luong,
# en->de, and last rnnsearch and encdec de-en, which have rows from another machine.
all_rows() {
  local m
  row cgru_de-en
  for m in encdec50 rnnsearch50 encdec30 rnnsearch30; do row "${m}_word_de-en"; done
  for m in memory_rnn self_attentive_rnn sar_avg sar_cavg luong; do row "${m}_de-en"; done
  for m in $MODELS; do row "${m}_en-de"; done
  for m in rnnsearch encdec; do row "${m}_de-en"; done
}

wanted() {  # is row $1 selected by $ROWS (all rows when unset)?
  [[ -z "${ROWS:-}" ]] && return 0
  for r in $ROWS; do [[ "$r" == "$1" ]] && return 0; done
  return 1
}

# Prints nothing and succeeds when one of the results.json files given after the row name $1
# was trained on this machine: the same label and CPU id (nmt_tf.cpu.recorded_here; rows from
# before CPU ids were recorded have none, so their VM is unknown). Otherwise prints why not.
from_here() {
  python3 - "$@" <<'PY'
import json
import sys
from nmt_tf.cpu import cpu_id, machine_label, recorded_here
here, here_cpu, others = machine_label(), cpu_id(), []
for path in sys.argv[2:]:
  try:
    with open(path, encoding="utf-8") as f:
      row = json.load(f)
  except (OSError, ValueError):  # no such row (an unreadable one does not count either)
    continue
  if recorded_here(row.get("machine"), row.get("cpu")):
    sys.exit(0)
  if row.get("machine") == here:  # this label, another or an unrecorded CPU id
    others.append(row.get("cpu") or "no CPU id recorded")
if others:
  print(f"was trained on another CPU of this machine's label ({', '.join(others)}; this one "
        f"is {here_cpu}), whose speed may differ")
else:
  print(f"has no row from this machine ({here})")
sys.exit(1)
PY
}

published_here() {  # was row $1 published from this machine?
  from_here "$1" docs/results/rows/"$1"/results.json docs/results/rows/"$1"@*/results.json \
    > /dev/null
}

planned=" "  # rows this queue runs before the current one
baseline_problem() {  # prints why row $1 may not run here; nothing when its baseline allows it
  local base="cgru_${1##*_}" why
  case "$1" in cgru_*|*_word_de-en) return 0 ;; esac  # baselines; word rows pair up
  [[ "$planned" == *" ${base} "* ]] && return 0
  # The baseline's row (run directory, or published from any machine) must come from this
  # machine: two Intel VMs of one label differed 1.7x in speed.
  why="$(from_here "$base" "runs/results/${base}/results.json" \
    docs/results/rows/"${base}"/results.json docs/results/rows/"${base}"@*/results.json)" \
    && return 0
  echo "${base}, its baseline, ${why}"
}

todo=0
while IFS='|' read -r name config extra; do
  wanted "$name" || continue
  if [[ -f "runs/results/${name}/results.json" ]]; then
    echo "done: ${name}"
    continue
  fi
  if published_here "$name"; then
    echo "done: ${name} (published)"
    continue
  fi
  problem="$(baseline_problem "$name")"
  if [[ -n "$problem" && -z "${ALLOW_NO_BASELINE:-}" ]]; then
    msg="row ${name}: ${problem}"
    if [[ $DRY_RUN == 1 ]]; then
      echo "${msg}: refused unless ALLOW_NO_BASELINE=1"
      continue
    fi
    if [[ "$problem" == *"has no row"* ]]; then
      echo "${msg}; run it first (ROWS=\"cgru_${name##*_} ${name}\"), or set ALLOW_NO_BASELINE=1" >&2
    else
      echo "${msg}; set ALLOW_NO_BASELINE=1 to compare with it anyway" >&2
    fi
    exit 1
  fi
  todo=$((todo + 1))
  planned+="${name} "
  # shellcheck disable=SC2086  # $extra holds several flags
  cmd=(.venv/bin/python run.py results "--config=${config}" "--run_dir=runs/results/${name}" $extra)
  echo "row ${name}: ${cmd[*]}"
  if [[ $DRY_RUN == 0 ]]; then
    mkdir -p runs/results
    "${cmd[@]}" >> "runs/results/${name}.log" 2>&1 || {
      echo "row ${name} failed; see runs/results/${name}.log" >&2
      exit 1
    }
    .venv/bin/python run.py report  # publish the row at once: commit docs/ after each row
  fi
done < <(all_rows)

if [[ $DRY_RUN == 1 ]]; then
  echo "${todo} row(s) to run"
fi
