"""Multi30k task 1 with word vocabularies of 10,000 words per side and sentences of at most 50
words: the setting of Bahdanau et al. 2015's RNNsearch-50, for the comparison with its Table 1
in docs/RESULTS.md.

  nmt-tf train --config=multi30k_word:rnnsearch --run_dir=runs/multi30k_word_rnnsearch

--config.pipeline.max_source_len=30 --config.pipeline.max_target_len=30 gives the -30 models.
Everything else is the SentencePiece recipe (multi30k.py), with a budget of 1 hour and the
paper's separate, unscaled embedding tables.
"""

from nmt_tf.configs import multi30k


def get_config(model="cgru"):
  config = multi30k.get_config(model)
  # Words outside the 10,000 most frequent become <unk>, as in the paper: about 2% of the
  # German tokens and 1% of the English ones of Multi30k.
  config.tokenizer.update(kind="word", vocab_size=10000)
  config.train.update(max_minutes=60.0)
  config.model.update(tie_embeddings="none", scale_embeddings=False)
  return config
