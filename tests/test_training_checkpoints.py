"""CheckpointKeeper: a checkpoint older than some training state restores the rest; a
checkpoint missing required state is set aside as partial; a damaged state file is recovered
from the files on disk; a run whose training state is gone is refused, not restarted; best/
is replaced only by a better model."""

import glob
import os
import tempfile

import tensorflow as tf

from nmt_tf.experiment import checkpoint_files, RunDirError
from nmt_tf.training.checkpoints import CheckpointKeeper


def _old_checkpoint(directory, step_value):
  """A checkpoint with `step` only, as written before an option added `clock`."""
  old = tf.train.Checkpoint(step=tf.Variable(step_value, dtype=tf.int64))
  tf.train.CheckpointManager(old, directory, 3).save(checkpoint_number=7)


def _keeper(directory, optional):
  objects = {"step": tf.Variable(0, dtype=tf.int64), "clock": tf.Variable(0.0, tf.float64)}
  model = tf.train.Checkpoint(step=objects["step"])
  return objects, CheckpointKeeper(objects, model, directory, os.path.join(directory, "best"),
                                   optional=optional)


class OptionalStateTest(tf.test.TestCase):

  def test_checkpoint_without_an_options_state_restores_the_rest(self):
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
    with self.assertRaisesRegex(RunDirError, "every checkpoint is corrupt or partial"):
      keeper.restore_latest(messages.append)
    self.assertIn("is corrupt or partial", messages[0])
    self.assertNotEmpty(glob.glob(os.path.join(directory, "corrupt", "ckpt-7.*")))

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
    with self.assertNoLogs("absl", level="WARNING"):  # said once, by the report, not twice
      self.assertEndsWith(keeper.restore_latest(messages.append), "ckpt-1")
    self.assertEqual(int(objects["step"].numpy()), 1)
    self.assertLen(messages, 1)
    self.assertIn("ckpt-2 is corrupt or partial", messages[0])
    self.assertNotEmpty(glob.glob(os.path.join(directory, "corrupt", "ckpt-2.*")))

  def test_unknown_optional_name(self):
    with self.assertRaisesRegex(ValueError, "optional names"):
      CheckpointKeeper({"step": tf.Variable(0)}, None, "a", "b", optional=("clock",))


def _saved_keeper(directory, steps=(10, 20, 30)):
  """A keeper that saved checkpoints at `steps` (step variable = the checkpoint's number)."""
  objects, keeper = _keeper(directory, optional=())
  for step in steps:
    objects["step"].assign(step)
    keeper.save(step)
  objects["step"].assign(0)
  return objects, keeper


def _restore(directory, **kwargs):
  """A new keeper (as a rerun makes) restoring `directory`: (path, step, messages)."""
  objects, keeper = _keeper(directory, optional=())
  messages = []
  path = keeper.restore_latest(messages.append, **kwargs)
  return path, int(objects["step"].numpy()), messages


class DamagedStateFileTest(tf.test.TestCase):

  def _check_recovered(self, directory):
    path, step, messages = _restore(directory)
    self.assertEndsWith(path, "ckpt-30")
    self.assertEqual(step, 30)
    self.assertLen(messages, 1)
    self.assertIn("recovering from the checkpoint files on disk", messages[0])
    # The state file is rewritten: the next rerun needs no recovery.
    self.assertEqual(tf.train.latest_checkpoint(directory), path)
    self.assertEqual(_restore(directory)[2], [])

  def test_missing_state_file_is_recovered_from_the_files(self):
    directory = tempfile.mkdtemp()
    _saved_keeper(directory)
    os.remove(os.path.join(directory, "checkpoint"))
    self._check_recovered(directory)

  def test_empty_and_garbage_state_files_are_recovered(self):
    for content in (b"", b"\x00\xffgarbage 12 {"):
      directory = tempfile.mkdtemp()
      _saved_keeper(directory)
      with open(os.path.join(directory, "checkpoint"), "wb") as f:
        f.write(content)
      self._check_recovered(directory)

  def test_checkpoint_written_but_not_yet_listed_is_used(self):
    # A kill between writing ckpt-40's files and updating the state file.
    directory = tempfile.mkdtemp()
    objects, keeper = _saved_keeper(directory)
    objects["step"].assign(40)
    keeper.checkpoint.write(os.path.join(directory, "ckpt-40"))
    path, step, _ = _restore(directory)
    self.assertEndsWith(path, "ckpt-40")
    self.assertEqual(step, 40)


class RefusalTest(tf.test.TestCase):

  def _corrupt_all(self, directory):
    for data in glob.glob(os.path.join(directory, "ckpt-*.data-*")):
      with open(data, "r+b") as f:
        f.truncate(1)

  def test_every_checkpoint_corrupt_refuses_until_restart_from_scratch(self):
    directory = tempfile.mkdtemp()
    _saved_keeper(directory)
    self._corrupt_all(directory)
    with self.assertRaisesRegex(RunDirError, r"every checkpoint is corrupt or partial \(set "
                                r"aside in .*corrupt: ckpt-10, ckpt-20, ckpt-30\).*"
                                "--restart_from_scratch"):
      _restore(directory)
    # Nothing deleted: the checkpoints and the state file are set aside, and a rerun of the
    # same command refuses again instead of starting from step 0.
    self.assertLen(glob.glob(os.path.join(directory, "corrupt", "ckpt-*.index")), 3)
    self.assertTrue(os.path.exists(os.path.join(directory, "corrupt", "checkpoint")))
    with self.assertRaisesRegex(RunDirError, "every checkpoint is corrupt or partial"):
      _restore(directory)
    path, step, messages = _restore(directory, restart_from_scratch=True)
    self.assertIsNone(path)
    self.assertEqual(step, 0)
    self.assertIn("Training from step 0 (--restart_from_scratch)", messages[-1])
    self.assertLen(glob.glob(os.path.join(directory, "corrupt", "ckpt-*.index")), 3)

  def test_restart_from_scratch_is_refused_while_a_checkpoint_is_usable(self):
    directory = tempfile.mkdtemp()
    _saved_keeper(directory)
    with self.assertRaisesRegex(RunDirError, "applies only when no checkpoint is usable"):
      _restore(directory, restart_from_scratch=True)
    self.assertLen(checkpoint_files.on_disk(directory), 3)

  def test_best_without_training_checkpoints_refuses(self):
    directory = tempfile.mkdtemp()
    _, keeper = _saved_keeper(directory)
    keeper.save_best(30, 12.5)
    for path in glob.glob(os.path.join(directory, "ckpt-*")) + [
        os.path.join(directory, "checkpoint")]:
      os.remove(path)
    with self.assertRaisesRegex(RunDirError, "has no training checkpoint but .*best/ckpt-30 "
                                "exists.*--restart_from_scratch"):
      _restore(directory)
    self.assertIsNone(_restore(directory, restart_from_scratch=True)[0])

  def test_fresh_directory_starts_at_step_zero(self):
    self.assertEqual(_restore(tempfile.mkdtemp()), (None, 0, []))

  def test_a_second_corruption_of_the_same_step_keeps_the_first(self):
    directory = tempfile.mkdtemp()
    for _ in range(2):
      _saved_keeper(directory, steps=(10,))
      self._corrupt_all(directory)
      with self.assertRaises(RunDirError):
        _restore(directory)
      _restore(directory, restart_from_scratch=True)
    self.assertEqual(checkpoint_files.set_aside_names(directory), ["ckpt-10", "ckpt-10~1"])


class BestGuardTest(tf.test.TestCase):

  def test_best_is_replaced_only_by_a_higher_recorded_score(self):
    directory = tempfile.mkdtemp()
    _, keeper = _saved_keeper(directory)
    self.assertIsNone(keeper.best_score())
    self.assertEndsWith(keeper.save_best(10, 20.0), "ckpt-10")
    self.assertIsNone(keeper.save_best(20, 19.0))
    self.assertIsNone(keeper.save_best(20, 20.0))
    # A new keeper (a restarted run) sees the record.
    _, other = _keeper(directory, optional=())
    self.assertEqual(other.best_score(), 20.0)
    self.assertIsNone(other.save_best(30, 5.0))
    self.assertEndsWith(other.best, "ckpt-10")
    self.assertEndsWith(other.save_best(30, 21.5), "ckpt-30")
    self.assertEqual(checkpoint_files.read_best_score(other.best_dir),
                     {"bleu": 21.5, "step": 30, "checkpoint": "ckpt-30",
                      "metric": "validation greedy BLEU"})
    self.assertEqual(checkpoint_files.on_disk(other.best_dir), [other.best])

  def test_best_without_its_own_record_is_kept_until_scored(self):
    directory = tempfile.mkdtemp()
    _, keeper = _saved_keeper(directory)
    keeper.save_best(20, 30.0)
    os.remove(os.path.join(keeper.best_dir, "score.json"))  # as written by older versions
    _, other = _keeper(directory, optional=())
    self.assertEqual(other.best_score(), float("inf"))
    self.assertEndsWith(other.unscored_best(), "ckpt-20")
    self.assertIsNone(other.save_best(30, 99.0))
    other.record_best(30.0, other.best)  # its measured score
    self.assertIsNone(other.unscored_best())
    self.assertEndsWith(other.save_best(30, 31.0), "ckpt-30")
    # A kill after saving ckpt-40 into best/ and before recording its score: the record names
    # another checkpoint, so best/'s model counts as unscored again.
    other.save_best(40, 32.0)
    other.record_best(31.0, os.path.join(other.best_dir, "ckpt-30"))
    self.assertEndsWith(other.unscored_best(), "ckpt-40")

  def test_best_state_file_lost_then_a_better_model_replaces_it(self):
    directory = tempfile.mkdtemp()
    _, keeper = _saved_keeper(directory)
    keeper.save_best(20, 30.0)
    os.remove(os.path.join(keeper.best_dir, "checkpoint"))
    _, other = _keeper(directory, optional=())
    self.assertEndsWith(other.best, "ckpt-20")
    self.assertIsNone(other.save_best(10, 29.0))
    self.assertEndsWith(other.save_best(10, 31.0), "ckpt-10")
    self.assertEqual(checkpoint_files.on_disk(other.best_dir), [other.best])


class LeftoversTest(tf.test.TestCase):

  def test_partial_saves_are_removed_and_set_aside_checkpoints_listed(self):
    directory = tempfile.mkdtemp()
    objects, keeper = _saved_keeper(directory)
    temp = os.path.join(directory, "ckpt-40_temp")
    os.makedirs(temp)
    with open(os.path.join(temp, "part-00000-of-00001.data-00000-of-00001"), "wb") as f:
      f.write(b"half")
    checkpoint_files.set_aside(os.path.join(directory, "ckpt-10"))
    messages = []
    keeper.tidy(messages.append)
    self.assertFalse(os.path.exists(temp))
    self.assertLen(messages, 2)
    self.assertIn("Removed ckpt-40_temp", messages[0])
    self.assertIn("1 checkpoint(s) set aside as corrupt", messages[1])
    self.assertIn("(ckpt-10)", messages[1])
    self.assertLen(checkpoint_files.on_disk(directory), 2)
    del objects


if __name__ == "__main__":
  tf.test.main()
