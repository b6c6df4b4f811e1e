"""CheckpointKeeper: a checkpoint older than some training state restores the rest; a
checkpoint missing required state is set aside as partial."""

import glob
import os
import tempfile

import tensorflow as tf

from nmt_tf.training.checkpoints import CheckpointKeeper
from nmt_tf.training.errors import TrainingError


def _old_checkpoint(directory, step_value):
  """A checkpoint with `step` only, as written before `clock` existed."""
  old = tf.train.Checkpoint(step=tf.Variable(step_value, dtype=tf.int64))
  tf.train.CheckpointManager(old, directory, 3).save(checkpoint_number=7)


def _keeper(directory, optional):
  objects = {"step": tf.Variable(0, dtype=tf.int64), "clock": tf.Variable(0.0, tf.float64)}
  model = tf.train.Checkpoint(step=objects["step"])
  return objects, CheckpointKeeper(objects, model, directory, os.path.join(directory, "best"),
                                   optional=optional)


class OptionalStateTest(tf.test.TestCase):

  def test_checkpoint_without_newer_state_restores_the_rest(self):
    directory = tempfile.mkdtemp()
    _old_checkpoint(directory, 41)
    objects, keeper = _keeper(directory, optional=("clock",))
    objects["clock"].assign(3.5)  # the initial value stays: nothing to restore it from
    messages = []
    path = keeper.restore_latest(messages.append)
    self.assertEndsWith(path, "ckpt-7")
    self.assertEqual(int(objects["step"].numpy()), 41)
    self.assertEqual(float(objects["clock"].numpy()), 3.5)
    self.assertEqual(messages, [f"Checkpoint {path} predates clock (left at the initial "
                                "value)."])
    self.assertEmpty(glob.glob(os.path.join(directory, "*corrupt*")))
    # The next save holds the new state too, and restores without the note.
    keeper.save(8)
    objects["clock"].assign(0.0)
    messages.clear()
    self.assertEndsWith(keeper.restore_latest(messages.append), "ckpt-8")
    self.assertEqual(float(objects["clock"].numpy()), 3.5)
    self.assertEmpty(messages)

  def test_missing_required_state_is_partial(self):
    directory = tempfile.mkdtemp()
    _old_checkpoint(directory, 41)
    _, keeper = _keeper(directory, optional=())
    messages = []
    with self.assertRaisesRegex(TrainingError, "Every checkpoint .* is corrupt or partial"):
      keeper.restore_latest(messages.append)
    self.assertIn("is corrupt or partial", messages[0])
    self.assertNotEmpty(glob.glob(os.path.join(directory, "ckpt-7.corrupt*")))

  def test_truncated_checkpoint_falls_back(self):
    directory = tempfile.mkdtemp()
    objects, keeper = _keeper(directory, optional=())
    for step in (1, 2):
      objects["step"].assign(step)
      keeper.save(step)
    data_file = glob.glob(os.path.join(directory, "ckpt-2.data-*"))[0]
    with open(data_file, "r+b") as f:  # raised IndexError, uncaught, before
      f.truncate(os.path.getsize(data_file) // 2)
    objects["step"].assign(0)
    messages = []
    self.assertEndsWith(keeper.restore_latest(messages.append), "ckpt-1")
    self.assertEqual(int(objects["step"].numpy()), 1)
    self.assertLen(messages, 1)
    self.assertIn("ckpt-2 is corrupt or partial", messages[0])
    self.assertNotEmpty(glob.glob(os.path.join(directory, "ckpt-2.corrupt*")))

  def test_unknown_optional_name(self):
    with self.assertRaisesRegex(ValueError, "optional names"):
      CheckpointKeeper({"step": tf.Variable(0)}, None, "a", "b", optional=("clock",))


if __name__ == "__main__":
  tf.test.main()
