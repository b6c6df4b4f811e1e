"""Multi30k French->English on 2,900 training pairs (a fixed 10% sample): a low-resource pair,
for transfer from a model of another language pair (Zoph et al. 2016), docs/TRAINING.md
"Fine-tuning". The parent is the de->en model of the Multi30k recipe; the child starts from its
weights, with the source vocabulary merged with one made from the French sample:

  nmt-tf train --config=multi30k:cgru --run_dir=runs/multi30k_cgru
  nmt-tf train --config=multi30k_lowres --run_dir=runs/fr_en_child \
      --init_from=runs/multi30k_cgru --update_vocab=merge

The same recipe without --init_from trains the baseline from scratch. Everything else is the
SentencePiece recipe (multi30k.py) with the budget in steps, not minutes (fine-tuned and
scratch runs are compared at equal steps), and a validation every 100 steps: 2,900 pairs are
about 20 batches.
"""

from nmt_tf.configs import multi30k


def get_config(model="cgru"):
  config = multi30k.get_config(model)
  config.data.update(source_lang="fr", train_sample=2900, train_sample_seed=0)
  config.train.update(steps=1500, max_minutes=0.0, warmup_steps=200, eval_every=100,
                      checkpoint_every=100, patience=0)
  return config
