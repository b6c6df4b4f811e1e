"""Default experiment: the cgru (dl4mt) model on the built-in generated language pair.

Small enough to train in minutes on 2 CPU cores; `python run.py train` uses it when no
--config is given.
"""

from nmt_tf.experiment import base_config


def get_config():
  config = base_config()
  config.data.name = "generated"
  config.data.train_size = 20000
  config.data.valid_size = 200
  config.data.test_size = 200
  config.tokenizer.kind = "word"
  config.tokenizer.vocab_size = 1000
  config.model.decoder = "cgru"
  config.model.embedding_dim = 64
  config.model.encoder_units = 64
  config.model.decoder_units = 128
  config.pipeline.batch_tokens = 2048
  config.train.steps = 1500
  config.train.learning_rate = 2e-3
  config.train.eval_every = 500
  config.train.checkpoint_every = 250
  config.decode.beam_size = 5
  return config
