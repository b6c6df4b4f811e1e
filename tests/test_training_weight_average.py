"""The moving average of the weights (training/weight_average.py): its equation, the weights
that validation and best/ use, and exact resume."""

import io
import os
import tempfile

import pytest
import tensorflow as tf

from nmt_tf.experiment.config import ConfigError, TrainConfig
from nmt_tf.training import Trainer
from nmt_tf.training.weight_average import WeightAverage
from tests.training_fixtures import tiny_train_config, train_until_killed


class WeightAverageTest(tf.test.TestCase):

  def test_update_follows_the_equation(self):
    theta = tf.Variable([1.0, 2.0])
    average = WeightAverage([theta], decay=0.5)
    average.update()  # d_1 = 0: the first average is the weights
    self.assertAllClose(average.averages[0], [1.0, 2.0])
    theta.assign([3.0, 4.0])
    average.update()  # d_2 = min(0.5, 1 / 11)
    expected = [1.0 / 11 * 1.0 + 10.0 / 11 * 3.0, 1.0 / 11 * 2.0 + 10.0 / 11 * 4.0]
    self.assertAllClose(average.averages[0], expected)
    for _ in range(20):  # (t - 1) / (t + 9) passes 0.5 at t = 11: d_t = d from there on
      average.update()
    before = average.averages[0].numpy()
    theta.assign([5.0, 6.0])
    average.update()
    self.assertAllClose(average.averages[0], 0.5 * before + 0.5 * tf.constant([5.0, 6.0]))
    self.assertEqual(int(average.updates.numpy()), 23)

  def test_update_in_a_function_as_the_train_step_does(self):
    theta = tf.Variable([2.0])
    average = WeightAverage([theta], decay=0.9)
    step = tf.function(average.update, autograph=False)
    step()
    theta.assign([4.0])
    step()
    self.assertAllClose(average.averages[0], [1.0 / 11 * 2.0 + 10.0 / 11 * 4.0])

  def test_applied_swaps_in_the_average_and_back(self):
    theta = tf.Variable([1.0])
    average = WeightAverage([theta], decay=0.5)
    with average.applied():  # no update yet: the weights stay
      self.assertAllClose(theta, [1.0])
    average.update()
    theta.assign([3.0])
    with average.applied():
      self.assertAllClose(theta, [1.0])
    self.assertAllClose(theta, [3.0])
    with self.assertRaises(KeyError):
      with average.applied():
        raise KeyError("inside")
    self.assertAllClose(theta, [3.0])  # put back after an error too

  def test_bad_decay(self):
    for bad in (0.0, 1.0, -0.1):
      with self.assertRaisesRegex(ValueError, "expected a number in"):
        WeightAverage([tf.Variable(1.0)], decay=bad)
    for bad in (1.0, -0.5, "0.9"):
      with self.assertRaisesRegex(ConfigError, "train.moving_average_decay"):
        TrainConfig(moving_average_decay=bad)


@pytest.mark.slow  # trains tiny runs
class TrainedAverageTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.config = tiny_train_config(steps=40, eval_every=20, checkpoint_every=20,
                                   moving_average_decay=0.9)
    cls.run_dir = os.path.join(cls.root, "ref")
    cls.trainer = Trainer(cls.config, cls.run_dir, stream=io.StringIO())
    cls.summary = cls.trainer.train()

  def _saved(self, path):
    """(model weights, averages) of the training checkpoint `path`."""
    trainer = Trainer(self.config, tempfile.mkdtemp(), corpus=self.trainer.corpus,
                      stream=io.StringIO())
    tf.train.Checkpoint(model=trainer.model, weight_average=trainer.weight_average).restore(
        path).expect_partial()
    return ([v.numpy() for v in trainer.model.trainable_variables],
            [a.numpy() for a in trainer.weight_average.averages])

  def test_best_holds_the_average_and_training_the_weights(self):
    best = self.summary["best_checkpoint"]
    step = best.rsplit("-", 1)[1]
    weights, averages = self._saved(os.path.join(self.run_dir, "checkpoints", f"ckpt-{step}"))
    model = Trainer(self.config, tempfile.mkdtemp(), corpus=self.trainer.corpus,
                    stream=io.StringIO()).model
    tf.train.Checkpoint(model=model).restore(best).expect_partial()
    for saved, average in zip(model.trainable_variables, averages):
      self.assertAllClose(saved, average)
    self.assertGreater(max(float(abs(w - a).max()) for w, a in zip(weights, averages)), 1e-3)
    # After validating, the trainer trains on its own weights, not the average.
    last, _ = self._saved(self.summary["checkpoint"])
    for variable, value in zip(self.trainer.model.trainable_variables, last):
      self.assertAllClose(variable, value)

  def test_resumed_run_has_the_same_average(self):
    run_dir = os.path.join(self.root, "resumed")
    latest = train_until_killed(self.config, run_dir, 30, stream=io.StringIO())
    self.assertEndsWith(latest, "ckpt-20")
    Trainer(self.config, run_dir, stream=io.StringIO()).train()
    _, resumed = self._saved(os.path.join(run_dir, "checkpoints", "ckpt-40"))
    _, reference = self._saved(os.path.join(self.run_dir, "checkpoints", "ckpt-40"))
    for got, want in zip(resumed, reference):
      self.assertAllClose(got, want, rtol=1e-3, atol=1e-4)

  def test_turned_on_in_a_resumed_run_it_starts_from_the_restored_weights(self):
    run_dir = os.path.join(self.root, "turned_on")
    plain = tiny_train_config(steps=40, eval_every=20, checkpoint_every=20)
    train_until_killed(plain, run_dir, 30, stream=io.StringIO())
    stream = io.StringIO()
    trainer = Trainer(self.config, run_dir, stream=stream)
    trainer.train()
    self.assertIn("predates weight_average", stream.getvalue())
    # Counted from 0 at the restore: update 1 (step 21) set the average to the weights then,
    # whatever it was created with (d_1 = 0, test_update_follows_the_equation).
    self.assertEqual(int(trainer.weight_average.updates.numpy()), 20)


if __name__ == "__main__":
  tf.test.main()
