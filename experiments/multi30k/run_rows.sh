#!/usr/bin/env bash
# Trains, evaluates and records the rows of the equal-step comparison on Multi30k that have no
# record yet, one after the other: the models and the ablations of the cgru recipe at 2,500
# steps de->en, then the longer en->de rows. A 2,500-step row takes 25 to 75 minutes on 2 cores
# with AVX512_BF16 or AMX, several times that on a CPU without them. Run it again after an
# interruption: training resumes exactly where it stopped.
#   bash experiments/multi30k/run_rows.sh            # every row
#   ROWS="sar_avg sar_cavg plateau_en-de" bash experiments/multi30k/run_rows.sh
#   RUN_ROOT=/data/study bash experiments/multi30k/run_rows.sh   # run directories elsewhere
#   PRECISION=recipe ROWS=layernorm bash experiments/multi30k/run_rows.sh   # bfloat16 ablations
#   PRECISION=float32_bf16_matmul ROWS=batch2k bash experiments/multi30k/run_rows.sh  # any CPU
#   ROWS="lowres fr-en multilingual" bash experiments/multi30k/run_rows.sh   # adaptation
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
RUN_ROOT=${RUN_ROOT:-runs/study}
STEPS=(--config.train.steps=2500 --config.train.max_minutes=0)
# The rows down to the ablations of today's recipe were trained before the recipe tied and
# scaled its embeddings: they pin each of these settings that they do not set themselves.
BEFORE=(--config.model.tie_embeddings=none --config.model.scale_embeddings=False)
# before FLAGS...: the settings of BEFORE that FLAGS do not set, one per line.
before() {
  local pin
  for pin in "${BEFORE[@]}"; do
    [[ " $* " == *" ${pin%%=*}="* ]] || printf '%s\n' "$pin"
  done
}

wanted() { [[ -z "${ROWS:-}" || " ${ROWS} " == *" $1 "* ]]; }

# The ablations of the first recipe after spm4k train in float32 against a float32 baseline by
# default: a precision that does not depend on the CPU keeps each row comparable with its
# baseline. The other rows have baselines recorded with bfloat16 products only, and name those
# products by default.
# PRECISION=recipe trains every row in the recipe's `auto` precision, against baselines with
# bfloat16 products: those on a CPU with AVX512_BF16 or AMX, faster than float32; elsewhere
# `auto` gives float32 and `study.py row` refuses the rows.
# PRECISION=float32_bf16_matmul names the bfloat16 products for every row, against the same
# baselines, comparable on any CPU: one without those instructions emulates them, slower
# (docs/PERFORMANCE.md has the speeds).
BF16=(--config.train.precision=float32_bf16_matmul)
case "${PRECISION:-float32}" in
  float32)
    PREC=(--config.train.precision=float32) BASE=cgru_float32_de-en_2500steps
    AS_RECORDED=("${BF16[@]}") ;;
  recipe)
    PREC=() BASE=cgru_de-en_2500steps AS_RECORDED=() ;;
  float32_bf16_matmul)
    PREC=("${BF16[@]}") BASE=cgru_de-en_2500steps AS_RECORDED=("${BF16[@]}") ;;
  *)
    echo "error: PRECISION=$PRECISION: use float32, recipe or float32_bf16_matmul." >&2
    exit 2 ;;
esac

if wanted cgru; then
  "$PYTHON" experiments/multi30k/study.py row cgru_de-en_2500steps \
    --config=multi30k:cgru --run_dir="$RUN_ROOT/cgru_de-en_2500steps" --keep_attention \
    -- "${STEPS[@]}" "${BEFORE[@]}"
fi
for model in sar_avg sar_cavg self_attentive_rnn; do
  if wanted "$model"; then
    "$PYTHON" experiments/multi30k/study.py row "${model}_de-en_2500steps" \
      --config="multi30k:${model}" --run_dir="$RUN_ROOT/${model}_de-en_2500steps" \
      --baseline=cgru_de-en_2500steps -- "${STEPS[@]}" "${BEFORE[@]}" "${AS_RECORDED[@]}"
  fi
done

# cgru_row NAME BASELINE NOTE FLAGS...: a row of the cgru recipe with FLAGS.
cgru_row() {
  local name=$1 baseline=$2 note=$3
  shift 3
  "$PYTHON" experiments/multi30k/study.py row "$name" --config=multi30k:cgru \
    --run_dir="$RUN_ROOT/$name" --baseline="$baseline" --note="$note" -- "$@"
}

# The ablations of the cgru recipe: one setting changed at a time against its baseline.
# ablation KEY BASELINE NOTE FLAGS...
ablation() {
  local key=$1 baseline=$2 note=$3 pins
  shift 3
  if wanted "$key"; then
    mapfile -t pins < <(before "$@")
    cgru_row "cgru_${key}_de-en_2500steps" "$baseline" "$note" "${STEPS[@]}" "$@" "${pins[@]}"
  fi
}
ablation spm4k cgru_de-en_2500steps \
  "SentencePiece vocabularies of 4,000 pieces per side instead of 8,000." \
  --config.train.precision=float32_bf16_matmul --config.tokenizer.vocab_size=4000

if wanted float32; then
  "$PYTHON" experiments/multi30k/study.py row cgru_float32_de-en_2500steps \
    --config=multi30k:cgru --run_dir="$RUN_ROOT/cgru_float32_de-en_2500steps" \
    --baseline=cgru_de-en_2500steps \
    --note="The recipe in float32 instead of bfloat16 products: the baseline of the ablations." \
    -- "${STEPS[@]}" "${BEFORE[@]}" --config.train.precision=float32
fi
ablation layernorm "$BASE" \
  "Layer-normalized GRUs in the encoder and the cGRU (Nematus)." \
  "${PREC[@]}" --config.model.layer_norm=True
ablation hiddendrop "$BASE" \
  "Variational dropout of 0.2 on the GRUs' recurrent states (Gal and Ghahramani 2016)." \
  "${PREC[@]}" --config.model.hidden_dropout=0.2
ablation tied "$BASE" \
  "The output projection tied to the target embeddings (Press and Wolf 2017)." \
  "${PREC[@]}" --config.model.tie_embeddings=target
ablation tied_scaled "$BASE" \
  "The output projection tied to the target embeddings, the tables stored at e^-1/2 of their scale (Vaswani et al. 2017)." \
  "${PREC[@]}" --config.model.tie_embeddings=target --config.model.scale_embeddings=True
# Combinations on top of the tied and scaled embeddings, against that row.
ablation spm4k_tied_scaled cgru_tied_scaled_de-en_2500steps \
  "Tied and scaled embeddings with SentencePiece 4k per side, against the same at 8k." \
  "${AS_RECORDED[@]}" --config.model.tie_embeddings=target --config.model.scale_embeddings=True \
  --config.tokenizer.vocab_size=4000
ablation scaled "$BASE" \
  "The embedding tables stored at e^-1/2 of their scale, lookups times e^1/2, untied (Vaswani et al. 2017)." \
  "${PREC[@]}" --config.model.scale_embeddings=True
ablation worddrop "$BASE" \
  "Word dropout of 0.1 on source and target tokens (Sennrich and Zhang 2019)." \
  "${PREC[@]}" --config.model.source_word_dropout=0.1 --config.model.target_word_dropout=0.1
ablation spm2k "$BASE" \
  "SentencePiece vocabularies of 2,000 pieces per side instead of 8,000." \
  "${PREC[@]}" --config.tokenizer.vocab_size=2000
# The ablations of today's recipe (tied and scaled embeddings, 8k pieces per side): one
# setting changed at a time against the recipe at 2,500 steps.
NEW_BASE=cgru_tied_scaled_de-en_2500steps
BEFORE=()  # nothing to pin from here on
# Recorded with SentencePiece's own sampling encoder, whose draws differ in every process; run
# again, the row draws from the same distribution (nmt_tf/data/segmentation_draws.py), not the
# same segmentations.
ablation subword "$NEW_BASE" \
  "Subword regularization: every epoch draws new segmentations from the 64 best, alpha 0.1 (Kudo 2018)." \
  "${AS_RECORDED[@]}" --config.pipeline.subword_alpha=0.1 --config.pipeline.subword_nbest=64
ablation lr2e-3 "$NEW_BASE" \
  "A peak learning rate of 0.002 instead of 0.001 (Sennrich and Zhang 2019 tune it per setting)." \
  "${AS_RECORDED[@]}" --config.train.learning_rate=0.002
ablation joint8k "$NEW_BASE" \
  "One SentencePiece vocabulary of 8,000 pieces for both languages." \
  "${AS_RECORDED[@]}" --config.tokenizer.shared=True
ablation tied_all cgru_joint8k_de-en_2500steps \
  "Three-way tied embeddings over the joint vocabulary, against the joint vocabulary." \
  "${AS_RECORDED[@]}" --config.tokenizer.shared=True --config.model.tie_embeddings=all
# Hard attention (Xu et al. 2015) against the same soft model: soft attention for the first
# 1,000 steps, then half of the sentences sample, trained with Xu et al.'s estimate at the
# REINFORCE weight that came within 0.53 BLEU of soft attention at step 2,500 (0.1; 1 cost
# 7.38 BLEU at step 1,500: docs/MODELS.md, "Hard attention on Multi30k"). How diagonal its
# alignments are against a soft run of this machine:
#   python bench/alignment_agreement.py --run_dir HARD_RUN --reference_run SOFT_RUN
ablation hard "$NEW_BASE" \
  "Hard attention: soft for 1,000 steps, then half of the sentences sample one position, REINFORCE (weight 0.1) with the sentence's mean cost as every decision's reward and a moving-average baseline (Xu et al. 2015)." \
  "${AS_RECORDED[@]}" --config.model.attention_mode=hard --config.model.hard_expectation_rate=0.5 \
  --config.reinforce.start=1000 --config.reinforce.reward=word_mean \
  --config.reinforce.weight=0.1 --config.reinforce.baseline_decay=0.9
ablation lexical "$NEW_BASE" \
  "The lexical model: attention-weighted source embeddings add their own logits (Nguyen and Chiang 2018)." \
  "${AS_RECORDED[@]}" --config.model.lexical_model=True
ablation embdrop "$NEW_BASE" \
  "Variational dropout of 0.2 on the embeddings, one mask per sentence (Nematus)." \
  "${AS_RECORDED[@]}" --config.model.embedding_dropout=0.2
ablation enc2 "$NEW_BASE" \
  "A deeper encoder: two stacked bidirectional GRU layers instead of one." \
  "${AS_RECORDED[@]}" --config.model.encoder_layers=2
ablation deeptrans "$NEW_BASE" \
  "A deep-transition decoder: four GRU transitions per step instead of two (Nematus)." \
  "${AS_RECORDED[@]}" --config.model.decoder_transition_depth=4
ablation ema "$NEW_BASE" \
  "Validation, early stopping and best/ on a moving average of the weights, d = 0.999 (Polyak and Juditsky 1992)." \
  "${AS_RECORDED[@]}" --config.train.moving_average_decay=0.999
# Smaller batches (Sennrich and Zhang 2019): at equal steps they would see half the data, so
# this row takes as many steps as it takes to see the baseline's tokens.
if wanted batch2k; then
  "$PYTHON" experiments/multi30k/study.py row cgru_batch2k_de-en_5000steps \
    --config=multi30k:cgru --run_dir="$RUN_ROOT/cgru_batch2k_de-en_5000steps" \
    --baseline="$NEW_BASE" \
    --note="Batches of 2,048 tokens instead of 4,096, for 5,000 steps: the baseline's tokens." \
    -- --config.train.steps=5000 --config.train.max_minutes=0 "${AS_RECORDED[@]}" \
    --config.pipeline.batch_tokens=2048
fi

# en->de, where the recipe overfits after about an hour: the 1-hour row's flags for a fixed
# number of steps with one setting changed, against the row that made as many steps.
# ende KEY STEPS BASELINE NOTE FLAGS... (ROWS names it KEY_en-de)
EN_DE=(--config.data.source_lang=en --config.data.target_lang=de)
ende() {
  local key=$1 steps=$2 baseline=$3 note=$4
  shift 4
  if wanted "${key}_en-de"; then
    cgru_row "cgru_tied_scaled_${key}_en-de_${steps}steps" "$baseline" "$note" "${EN_DE[@]}" \
      --config.train.steps="$steps" --config.train.max_minutes=0 "${AS_RECORDED[@]}" "$@"
  fi
}
ende seed2 6001 cgru_tied_scaled_en-de_1h_epyc-f26 \
  "The 1-hour en->de tied-and-scaled row's recipe with another seed (train.seed and pipeline.seed: weights, dropout and data order), for the 6001 steps that row made in its hour." \
  --config.train.seed=2 --config.pipeline.seed=2
ende hiddendrop 6001 cgru_tied_scaled_en-de_1h_epyc-f26 \
  "The 1-hour en->de row's recipe with variational dropout of 0.2 on the GRUs' recurrent states, for the 6,001 steps that row made in its hour: regularization where the recipe overfits." \
  --config.model.hidden_dropout=0.2
ende ema 6001 cgru_tied_scaled_en-de_1h_epyc-f26 \
  "The 1-hour en->de row's recipe with validation, early stopping and best/ on a moving average of the weights, d = 0.999, for the 6,001 steps that row made in its hour." \
  --config.train.moving_average_decay=0.999
ende plateau 12000 cgru_tied_scaled_en-de_2h_epyc-f26 \
  "The 2-hour en->de row's recipe with the learning rate halved at every third validation without a BLEU gain, for up to 12,000 steps: that row stopped early at step 8,000." \
  --config.train.plateau_factor=0.5 --config.train.plateau_patience=3

# Adaptation (docs/TRAINING.md, "Fine-tuning" and "Several languages in one model"). The
# parent: the de->en recipe for 50 minutes. Fine-tuned to French->English (its source
# vocabulary merged with one of the French data) against the same model from scratch, at equal
# steps: on a fixed 10% sample (recipe multi30k_lowres), then on all 29,000 pairs.
PARENT=cgru_tied_scaled_de-en_50min_xeon-m207
MERGE=(--init_from="$RUN_ROOT/$PARENT" --update_vocab=merge)
EQUAL=(--config.train.max_minutes=0 "${AS_RECORDED[@]}")
FR_EN=(--config.data.source_lang=fr --config.train.steps=1500 "${EQUAL[@]}")
adapt() {  # adapt NAME CONFIG [--baseline=ROW ...] -- FLAGS...
  local name=$1 config=$2
  shift 2
  "$PYTHON" experiments/multi30k/study.py row "$name" --config="$config" \
    --run_dir="$RUN_ROOT/$name" "$@"
}
if wanted lowres || wanted fr-en; then
  adapt "$PARENT" multi30k:cgru -- --config.train.max_minutes=50 "${AS_RECORDED[@]}"
fi
if wanted lowres; then
  adapt cgru_fr-en_2900pairs_scratch_1500steps multi30k_lowres -- "${AS_RECORDED[@]}"
  adapt cgru_fr-en_2900pairs_merge_1500steps multi30k_lowres \
    --baseline=cgru_fr-en_2900pairs_scratch_1500steps -- "${MERGE[@]}" "${AS_RECORDED[@]}"
fi
if wanted fr-en; then
  adapt cgru_fr-en_scratch_1500steps multi30k:cgru -- "${FR_EN[@]}"
  adapt cgru_fr-en_merge_1500steps multi30k:cgru --baseline=cgru_fr-en_scratch_1500steps \
    -- "${FR_EN[@]}" "${MERGE[@]}"
fi
# de->en and de->fr in one model with target-language tags, against the two bilingual models
# at equal total steps: one run, a row for each of its target languages.
if wanted multilingual; then
  adapt cgru_de-en_1000steps multi30k:cgru -- --config.train.steps=1000 "${EQUAL[@]}"
  adapt cgru_de-fr_1000steps multi30k:cgru \
    -- --config.data.target_lang=fr --config.train.steps=1000 "${EQUAL[@]}"
  for lang in en fr; do
    "$PYTHON" experiments/multi30k/study.py row "cgru_multilingual_de-${lang}_2000steps" \
      --config=multi30k_multilingual --run_dir="$RUN_ROOT/cgru_multilingual_2000steps" \
      --target_lang="$lang" --baseline="cgru_de-${lang}_1000steps" \
      -- --config.train.steps=2000 "${EQUAL[@]}"
  done
fi
"$PYTHON" experiments/multi30k/study.py report
