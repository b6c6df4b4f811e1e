"""A tiny training experiment shared by the training tests."""

import dataclasses

from nmt_tf.experiment import ExperimentConfig, base_config


def tiny_train_config(steps=40, **train_overrides):
  """Generated pair (600 pairs), word vocabularies, a tiny cgru model, greedy validation."""
  config = base_config()
  config.data.train_size = 600
  config.data.valid_size = 16
  config.data.test_size = 8
  config.data.max_length = 8
  config.tokenizer.kind = "word"
  config.tokenizer.vocab_size = 200
  config.model.decoder = "cgru"
  config.model.embedding_dim = 32
  config.model.encoder_units = 32
  config.model.decoder_units = 64
  config.pipeline.batch_tokens = 400
  config.pipeline.max_source_len = 20
  config.pipeline.max_target_len = 20
  config.train.steps = steps
  config.train.learning_rate = 2e-2
  config.train.eval_every = steps
  config.train.checkpoint_every = 10
  config.train.log_every = 5
  config.train.alignment_images = 2
  config.decode.beam_size = 1
  config.decode.max_length = 30
  config = ExperimentConfig.from_dict(config)
  return config.replace(train=dataclasses.replace(config.train, **train_overrides))
