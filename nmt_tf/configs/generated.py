"""The built-in generated language pair: the quick start and the default recipe.

  nmt-tf train --config=generated:cgru --run_dir=runs/quickstart

The part after the colon names a model preset (`nmt-tf recipes` lists them; cgru when it is
left out). The generated pair is a rule-based toy language with reordering, agreement and
fertility (nmt_tf/data/generated.py): about 90 source and 120 target words, which word
vocabularies cover whole, and a small model learns it in a few minutes on a CPU: what a first
run needs. Every field not set here keeps the default of nmt_tf/experiment/config.py
(`nmt-tf train --help` lists them); override any on the command line, e.g.
--config.train.steps=100.
"""

from nmt_tf.experiment import base_config


def get_config(model="cgru"):
  config = base_config(model)
  # 20,000 training pairs; small validation and test sets keep each validation to seconds.
  config.data.update(name="generated", train_size=20000, valid_size=200, test_size=200)
  # About 90 and 120 words: a word vocabulary holds them all, no subwords needed.
  config.tokenizer.update(kind="word", vocab_size=1000)
  config.model.update(embedding_dim=64, encoder_units=64, decoder_units=128)
  config.pipeline.update(batch_tokens=2048)
  # No dropout, label smoothing or warm-up: the data is clean and plentiful for its size, so a
  # higher constant learning rate converges fastest.
  config.train.update(steps=1500, learning_rate=0.002, checkpoint_every=250)
  config.decode.update(max_length=100)
  return config
