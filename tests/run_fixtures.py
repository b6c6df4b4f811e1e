"""A tiny run directory (config, word vocabularies, one checkpoint) for command-level tests."""

import glob
import os

import keras
import tensorflow as tf

from nmt_tf.experiment import ExperimentConfig, RunDir, base_config
from nmt_tf.models import Seq2Seq


def apply(config, sections):
  """Sets config.<section>.<field> = value for {section: {field: value}}; returns config."""
  for section, values in sections.items():
    config[section].update(values)
  return config


def tensorboard_events(run_dir):
  """{tag: [(step, summary value)]} from the run's TensorBoard event files."""
  tags = {}
  for path in glob.glob(os.path.join(run_dir, "tensorboard", "events.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append((event.step, value))
  return tags


def scalar(value):
  """The float of a TensorBoard summary value (a tensor or a simple value)."""
  return float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value


def tiny_experiment(decoder="cgru", tokenizer="word", **model_overrides):
  """A small ExperimentConfig on the generated pair (word or SentencePiece vocabularies, tiny
  model)."""
  config = apply(base_config(), {
      "data": dict(train_size=300, valid_size=16, test_size=16, max_length=20),
      "tokenizer": dict(kind=tokenizer, vocab_size=90 if tokenizer == "word" else 120),
      "model": {**dict(decoder=decoder, embedding_dim=8, encoder_units=8, decoder_units=16),
                **model_overrides},
      "pipeline": dict(batch_tokens=512),
      "train": dict(steps=20, eval_every=10, checkpoint_every=10),
      "decode": dict(beam_size=3, max_length=40),
  })
  return ExperimentConfig.from_dict(config)


def make_tiny_run(path, decoder="cgru", seed=0, tokenizer="word", **model_overrides):
  """Prepares a run at `path` and saves one untrained checkpoint (in checkpoints/ and best/).

  Returns:
    (RunDir, ExperimentConfig with vocabulary sizes, corpus).
  """
  run = RunDir(path)
  config, corpus, _, _ = run.prepare(tiny_experiment(decoder, tokenizer, **model_overrides))
  keras.utils.set_random_seed(seed)
  model = Seq2Seq(config.model)
  model.build_with_dummy_batch()
  checkpoint = tf.train.Checkpoint(model=model)
  checkpoint.save(f"{run.checkpoint_dir}/ckpt")
  checkpoint.save(f"{run.best_dir}/ckpt")
  return run, config, corpus
