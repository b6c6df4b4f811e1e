"""A tiny training experiment shared by the training tests, and the recipes of nmt_tf/configs."""

import dataclasses
from unittest import mock

import keras
import tensorflow as tf

from nmt_tf import configs
from nmt_tf.experiment import ExperimentConfig, base_config
from nmt_tf.models import Seq2Seq, losses
from nmt_tf.training import Trainer
from nmt_tf.training.progress import ProgressPrinter
from nmt_tf.training.train_step import TrainStep
from tests.model_fixtures import batch, tiny_config
from tests.run_fixtures import apply


def recipe(name):
  """The ExperimentConfig of recipe `name` ("multi30k:luong"), as --config=NAME loads it."""
  return ExperimentConfig.from_dict(configs.load(name))


def sgd_update(clip_norm):
  """(model, batch, loss, norm, expected weights) of one update by its equations: g =
  d(mean token NLL)/dw over the batch's real tokens, g <- g * min(1, clip_norm / |g|)
  (Pascanu et al. 2013), then plain SGD at rate 1, so that every weight moves by exactly -g.
  The model: a seeded tiny cgru without dropout."""
  keras.utils.set_random_seed(4)
  model = Seq2Seq(tiny_config(decoder="cgru", dropout=0.0))
  b = batch()
  inputs = {"source": b["source"], "target_in": b["target_in"]}
  model(inputs)
  with tf.GradientTape() as tape:
    total, count = losses.token_loss_sum(model(inputs, training=True)["logits"],
                                         b["target_out"])
    loss = total / count
  # Dense: the norm of an embedding's IndexedSlices would count a repeated token's rows apart.
  grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]
  norm = float(tf.linalg.global_norm(grads))
  factor = min(1.0, clip_norm / norm) if clip_norm > 0 else 1.0
  expected = [v.numpy() - factor * g.numpy() for v, g in zip(model.trainable_variables, grads)]
  return model, b, float(loss), norm, expected


def tiny_train_config(steps=40, **train_overrides):
  """Generated pair (600 pairs), word vocabularies, a tiny cgru model, greedy validation."""
  config = apply(base_config(), {
      "data": dict(train_size=600, valid_size=16, test_size=8, max_length=8),
      "tokenizer": dict(kind="word", vocab_size=200),
      "model": dict(decoder="cgru", embedding_dim=32, encoder_units=32, decoder_units=64),
      "pipeline": dict(batch_tokens=400, max_source_len=20, max_target_len=20),
      "train": dict(steps=steps, learning_rate=2e-2, eval_every=steps, checkpoint_every=10,
                    log_every=5, alignment_images=2),
      "decode": dict(beam_size=1, max_length=30),
  })
  config = ExperimentConfig.from_dict(config)
  return config.replace(train=dataclasses.replace(config.train, **train_overrides))


class Killed(Exception):
  """Raised by `train_until_killed` where a kill would stop the process."""


def train_until_killed(config, run_dir, step, **kwargs):
  """Trains until `step` is done and stops there as a kill does: before that step's
  validation and checkpoint, without a final save or summary. Returns the latest checkpoint.
  (The hook: the progress line's update of that step raises.)"""
  trainer = Trainer(config, run_dir, **kwargs)
  update = ProgressPrinter.update

  def update_then_stop(printer, done, *args, **update_kwargs):
    update(printer, done, *args, **update_kwargs)
    if done >= step:
      raise Killed(done)
  with mock.patch.object(ProgressPrinter, "update", update_then_stop):
    try:
      trainer.train()
    except Killed:
      pass
  return trainer.keeper.latest


def nan_loss_at(step):
  """A patch of TrainStep under which the `step`-th call of this process (1-based) returns a
  NaN loss, as a diverging step would."""
  call = TrainStep.__call__
  calls = [0]

  def poisoned(train_step, batch, diagnose=False):
    out = call(train_step, batch, diagnose)
    calls[0] += 1
    if calls[0] == step:
      out = dict(out, loss=tf.constant(float("nan")))
    return out
  return mock.patch.object(TrainStep, "__call__", poisoned)
