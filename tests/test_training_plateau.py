"""The learning rate's decay on plateaus (train.plateau_factor, training/schedules.py): the
scaled schedule, the step that applies it, the decisions of a run, and exact resume."""

import dataclasses
import io
import os
import tempfile
from unittest import mock

import pytest
import tensorflow as tf

from nmt_tf.experiment.config import ConfigError, TrainConfig
from nmt_tf.training import Trainer
from nmt_tf.training.optimizers import FusedAdam
from nmt_tf.training.schedules import WarmupSchedule
from nmt_tf.training.validation import Validator
from tests.run_fixtures import scalar, tensorboard_events
from tests.training_fixtures import tiny_train_config, train_until_killed


def scripted_bleu(scores):
  """A patch under which the validations of a run score `scores` in turn (their other
  figures are real)."""
  run = Validator.run
  scores = iter(scores)

  def scripted(validator):
    return dataclasses.replace(run(validator), bleu=next(scores))
  return mock.patch.object(Validator, "run", scripted)


class PlateauScheduleTest(tf.test.TestCase):

  def test_the_schedule_is_scaled(self):
    scale = tf.Variable(1.0)
    schedule = WarmupSchedule(2.0, "inverse_sqrt", warmup_steps=4, scale=scale)
    self.assertAllClose(float(schedule(15)), 1.0)
    scale.assign(0.25)
    self.assertAllClose(float(schedule(15)), 0.25)
    self.assertAllClose(float(tf.function(schedule)(tf.constant(15))), 0.25)
    self.assertNotIn("scale", schedule.get_config())  # state, checkpointed by the trainer

  def test_the_optimizer_steps_with_the_scaled_rate(self):
    scale = tf.Variable(0.0)
    weight = tf.Variable([1.0, 2.0])
    optimizer = FusedAdam(learning_rate=WarmupSchedule(0.1, scale=scale))
    optimizer.build([weight])
    optimizer.apply([tf.constant([1.0, -1.0])], [weight])
    self.assertAllClose(weight, [1.0, 2.0])  # k = 0: no step
    scale.assign(0.5)
    optimizer.apply([tf.constant([1.0, -1.0])], [weight])
    self.assertAllClose(weight, [0.95, 2.05], atol=1e-4)  # Adam's step is ~ the rate, 0.05

  def test_bad_values(self):
    for bad in (1.0, -0.1, "0.5"):
      with self.assertRaisesRegex(ConfigError, "train.plateau_factor"):
        TrainConfig(plateau_factor=bad)
    for bad in (0, -1, 2.5):
      with self.assertRaisesRegex(ConfigError, "train.plateau_patience"):
        TrainConfig(plateau_factor=0.5, plateau_patience=bad)
    with self.assertRaisesRegex(ConfigError, "lower plateau_patience or raise patience"):
      TrainConfig(plateau_factor=0.5, plateau_patience=3, patience=3)
    TrainConfig(plateau_patience=3, patience=3)  # off: no conflict
    TrainConfig(plateau_factor=0.5, plateau_patience=3, patience=0)  # never stops


# Validations at steps 5, 10, ..., 40: two without a gain at 20 and again at 40 (the gain at
# 30 starts the count anew), so the rate decays twice.
SCORES = [5.0, 6.0, 6.0, 6.0, 6.0, 7.0, 7.0, 7.0]


@pytest.mark.slow  # trains tiny runs
class PlateauRunTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.config = tiny_train_config(steps=40, eval_every=5, checkpoint_every=10,
                                   plateau_factor=0.5, plateau_patience=2)
    cls.stream = io.StringIO()
    with scripted_bleu(SCORES):
      cls.trainer = Trainer(cls.config, os.path.join(cls.root, "ref"), stream=cls.stream)
      cls.summary = cls.trainer.train()

  def test_the_rate_decays_after_each_plateau(self):
    log = self.stream.getvalue()
    self.assertIn("Learning rate x 0.5 after 2 validations without a BLEU gain: 0.01 at step "
                  "20.", log)
    self.assertIn("Learning rate x 0.5 after 2 validations without a BLEU gain: 0.005 at step "
                  "40.", log)
    self.assertEqual(log.count("Learning rate x"), 2)
    self.assertAllClose(float(self.trainer.lr_scale.numpy()), 0.25)
    self.assertAllClose(float(self.trainer.optimizer.learning_rate), 0.02 * 0.25)
    self.assertEqual(self.summary["steps"], 40)  # patience 0: it never stops early
    # The steps' own rate (TensorBoard, every 5 steps): the decay after the validation of
    # step 20 moves the steps after it.
    rates = {step: scalar(value) for step, value in
             tensorboard_events(os.path.join(self.root, "ref"))["train/learning_rate"]}
    self.assertAllClose([rates[s] for s in (5, 10, 15, 20, 25, 30, 35, 40)],
                        [0.02] * 4 + [0.01] * 4)

  def test_resumed_run_decays_as_the_uninterrupted_one(self):
    run_dir = os.path.join(self.root, "resumed")
    with scripted_bleu(SCORES[:4]):  # killed after step 22: ckpt-20 holds k = 0.5
      self.assertEndsWith(train_until_killed(self.config, run_dir, 22, stream=io.StringIO()),
                          "ckpt-20")
    stream = io.StringIO()
    with scripted_bleu(SCORES[4:]):  # the validations of steps 25 to 40
      trainer = Trainer(self.config, run_dir, stream=stream)
      trainer.train()
    self.assertAllClose(float(trainer.lr_scale.numpy()), 0.25)
    self.assertEqual(stream.getvalue().count("Learning rate x"), 1)
    self.assertIn("without a BLEU gain: 0.005 at step 40.", stream.getvalue())

  def test_turned_on_in_a_resumed_run_it_starts_at_one(self):
    run_dir = os.path.join(self.root, "turned_on")
    plain = tiny_train_config(steps=40, eval_every=5, checkpoint_every=10)
    with scripted_bleu(SCORES[:4]):
      train_until_killed(plain, run_dir, 22, stream=io.StringIO())
    stream = io.StringIO()
    with scripted_bleu(SCORES[4:]):
      trainer = Trainer(self.config, run_dir, stream=stream)
      trainer.train()
    self.assertIn("predates lr_scale", stream.getvalue())
    # bad_evals was 2 at the restore: 3 at step 25 (odd, no decay), 0 after the gain at 30,
    # 2 at 40 (one decay).
    self.assertAllClose(float(trainer.lr_scale.numpy()), 0.5)


if __name__ == "__main__":
  tf.test.main()
