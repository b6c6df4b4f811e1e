"""A run directory is never lost: a damaged state file is recovered, a restart never replaces a
better best/, a second process is refused, a changed corpus is refused, a run without a
validation split trains, a diverging loss and non-finite settings are reported."""

import dataclasses
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tempfile
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from nmt_tf.data import generated
from nmt_tf.experiment import run_lock, RunDirError
from nmt_tf.experiment.run_lock import RunLock
from nmt_tf.models.config import ConfigError
from nmt_tf.training import Trainer, TrainingError
from nmt_tf.training.divergence import DivergenceWatch
from tests.training_fixtures import tiny_train_config


def _digest(directory):
  """SHA-256 of every file below `directory` (names and bytes)."""
  digest = hashlib.sha256()
  for root, _, files in sorted(os.walk(directory)):
    for name in sorted(files):
      path = os.path.join(root, name)
      digest.update(os.path.relpath(path, directory).encode())
      with open(path, "rb") as f:
        digest.update(f.read())
  return digest.hexdigest()


def _score(run_dir):
  with open(os.path.join(run_dir, "best", "score.json"), encoding="utf-8") as f:
    return json.load(f)


def _with_steps(config, steps, **train):
  return config.replace(train=dataclasses.replace(config.train, steps=steps, eval_every=steps,
                                                  **train))


@pytest.mark.slow  # trains a run
class TrainedRunTest(tf.test.TestCase):
  """One 40-step run (validation every 20 steps, checkpoints every 10), copied per test."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.config = tiny_train_config(steps=40, eval_every=20, checkpoint_every=10)
    cls.reference = os.path.join(cls.root, "reference")
    Trainer(cls.config, cls.reference, stream=io.StringIO()).train()

  def _copy(self):
    run_dir = os.path.join(tempfile.mkdtemp(dir=self.root), "run")
    shutil.copytree(self.reference, run_dir)
    return run_dir

  def _train(self, run_dir, config, **kwargs):
    stream = io.StringIO()
    summary = Trainer(config, run_dir, stream=stream, **kwargs).train()
    return summary, stream.getvalue()

  def test_best_has_its_score(self):
    record = _score(self.reference)
    self.assertEqual(record["checkpoint"], os.path.basename(
        tf.train.latest_checkpoint(os.path.join(self.reference, "best"))))
    self.assertIn(record["step"], (20, 40))
    self.assertFalse(os.path.exists(os.path.join(self.reference, "train.lock")))

  def test_missing_or_garbage_state_file_resumes_and_keeps_best(self):
    for content in (None, b"model_checkpoint_path: \x00\xff"):
      run_dir = self._copy()
      state = os.path.join(run_dir, "checkpoints", "checkpoint")
      os.remove(state)
      if content is not None:
        with open(state, "wb") as f:
          f.write(content)
      best_before, score_before = _digest(os.path.join(run_dir, "best")), _score(run_dir)
      summary, log = self._train(run_dir, _with_steps(self.config, 41))
      self.assertIn("recovering from the checkpoint files on disk", log)
      self.assertIn(f"Resumed from {run_dir}/checkpoints/ckpt-40 at step 40", log)
      self.assertEqual(summary["steps"], 41)
      if _score(run_dir)["bleu"] <= score_before["bleu"]:
        self.assertEqual(_digest(os.path.join(run_dir, "best")), best_before)

  def test_restart_from_scratch_never_replaces_a_better_best(self):
    run_dir = self._copy()
    for name in os.listdir(os.path.join(run_dir, "checkpoints")):
      if ".data-" in name:
        with open(os.path.join(run_dir, "checkpoints", name), "r+b") as f:
          f.truncate(3)
    with self.assertRaisesRegex(RunDirError, "every checkpoint is corrupt or partial"):
      self._train(run_dir, self.config)
    with self.assertRaisesRegex(RunDirError, "every checkpoint is corrupt or partial"):
      self._train(run_dir, self.config)  # the same command again: still refused
    # A best/ model worth more than anything 20 steps from scratch can reach.
    record = dict(_score(run_dir), bleu=100.0)
    with open(os.path.join(run_dir, "best", "score.json"), "w", encoding="utf-8") as f:
      json.dump(record, f)
    best_before = _digest(os.path.join(run_dir, "best"))
    summary, log = self._train(run_dir, _with_steps(self.config, 20),
                               restart_from_scratch=True)
    self.assertIn("Training from step 0 (--restart_from_scratch)", log)
    self.assertIn("best of this run; best/ keeps", log)
    self.assertEqual(summary["steps"], 20)
    self.assertEqual(_digest(os.path.join(run_dir, "best")), best_before)
    self.assertLen(os.listdir(os.path.join(run_dir, "checkpoints", "corrupt")), 7)  # 3 + state
    # From scratch again, best/ recorded at exactly the BLEU these 20 steps reach: kept, and
    # the log does not call the equal model a new best.
    shutil.rmtree(os.path.join(run_dir, "checkpoints"))
    record["bleu"] = float(np.float32(summary["last_validation"]["bleu"]))
    with open(os.path.join(run_dir, "best", "score.json"), "w", encoding="utf-8") as f:
      json.dump(record, f)
    best_before = _digest(os.path.join(run_dir, "best"))
    again, log = self._train(run_dir, _with_steps(self.config, 20), restart_from_scratch=True)
    self.assertEqual(again["last_validation"]["bleu"], summary["last_validation"]["bleu"])
    self.assertNotIn("(new best)", log)
    self.assertIn("best of this run; best/ keeps", log)
    self.assertEqual(_digest(os.path.join(run_dir, "best")), best_before)

  def test_rerunning_a_finished_run_keeps_its_summary(self):
    run_dir = self._copy()
    path = os.path.join(run_dir, "train_summary.json")
    with open(path, "rb") as f:
      before = f.read()
    summary, _ = self._train(run_dir, self.config)
    with open(path, "rb") as f:
      self.assertEqual(f.read(), before)
    self.assertEqual(summary, json.loads(before))
    self.assertIsNotNone(summary["loss"])
    self.assertIsNotNone(summary["last_validation"])

  def test_full_disk_while_saving_is_one_error_and_resumes(self):
    run_dir = self._copy()
    checkpoints = os.path.join(run_dir, "checkpoints")
    real_save = tf.train.CheckpointManager.save

    def full_disk(manager, *args, **kwargs):
      del args, kwargs
      os.makedirs(os.path.join(manager.directory, "ckpt-42_temp"))  # what a failed save leaves
      raise tf.errors.ResourceExhaustedError(
          None, None, f"{manager.directory}/ckpt-42_temp/part-00000-of-00001.data-00000-of-"
          "00001.tempstate1; No space left on device [Op:SaveV2]")

    with mock.patch.object(tf.train.CheckpointManager, "save", full_disk):
      with self.assertRaisesRegex(TrainingError, f"^No space left on device while saving "
                                  f"checkpoint ckpt-42 in {run_dir}/best; free disk space and "
                                  f"rerun the same command: training resumes from "
                                  f"{checkpoints}/ckpt-40.$"):
        self._train(run_dir, _with_steps(self.config, 42))
    self.assertFalse(os.path.exists(os.path.join(run_dir, "best", "ckpt-42_temp")))
    self.assertFalse(os.path.exists(os.path.join(run_dir, "train.lock")))
    self.assertIs(tf.train.CheckpointManager.save, real_save)
    summary, log = self._train(run_dir, _with_steps(self.config, 42))
    self.assertIn("Resumed from", log)
    self.assertEqual(summary["steps"], 42)

  def test_best_without_checkpoints_is_refused(self):
    run_dir = self._copy()
    shutil.rmtree(os.path.join(run_dir, "checkpoints"))
    with self.assertRaisesRegex(RunDirError, "has no training checkpoint but .*best/ckpt-"):
      self._train(run_dir, self.config)

  def test_second_process_is_refused_and_a_stale_lock_taken_over(self):
    run_dir = self._copy()
    other = subprocess.Popen(["sleep", "60"])
    try:
      lock = os.path.join(run_dir, "train.lock")
      with open(lock, "w", encoding="utf-8") as f:
        json.dump({"pid": other.pid, "host": os.uname().nodename, "started": "then"}, f)
      with self.assertRaisesRegex(RunDirError, f"is being trained by process {other.pid} on "
                                  "this host"):
        self._train(run_dir, self.config)
      self.assertFalse(os.path.exists(os.path.join(run_dir, "checkpoints", "corrupt")))
    finally:
      other.kill()
      other.wait()
    summary, log = self._train(run_dir, _with_steps(self.config, 42))
    self.assertIn(f"Taking over the lock {lock} of process {other.pid}", log)
    self.assertEqual(summary["steps"], 42)
    self.assertFalse(os.path.exists(lock))

  def test_lock_of_another_host_is_refused(self):
    run_dir = self._copy()
    with open(os.path.join(run_dir, "train.lock"), "w", encoding="utf-8") as f:
      json.dump({"pid": 1, "host": "elsewhere", "started": "then"}, f)
    with self.assertRaisesRegex(RunDirError, "process 1 on host elsewhere .*delete the lock "
                                "file if that process is gone"):
      self._train(run_dir, self.config)


class LockTest(tf.test.TestCase):

  def test_lock_of_a_pid_now_held_by_another_process_is_stale(self):
    run_dir = tempfile.mkdtemp()
    lock = os.path.join(run_dir, "train.lock")
    other = subprocess.Popen(["sleep", "60"])
    try:
      started = run_lock.start_time(other.pid)
      self.assertIsNotNone(started)
      record = {"pid": other.pid, "host": socket.gethostname(), "started": "then"}
      # The owner had that pid and is gone; the pid now belongs to `sleep`, started later.
      with open(lock, "w", encoding="utf-8") as f:
        json.dump(dict(record, pid_start=started - 1), f)
      messages = []
      RunLock(run_dir, report=messages.append).acquire().release()
      self.assertLen(messages, 1)
      self.assertIn(f"of process {other.pid} (since then), which no longer runs (pid "
                    f"{other.pid} is now another process).", messages[0])
      self.assertFalse(os.path.exists(lock))
      # The owner itself still runs: refused.
      with open(lock, "w", encoding="utf-8") as f:
        json.dump(dict(record, pid_start=started), f)
      with self.assertRaisesRegex(RunDirError, f"being trained by process {other.pid} on this "
                                  "host"):
        RunLock(run_dir).acquire()
    finally:
      other.kill()
      other.wait()


@pytest.mark.slow  # trains
class CorpusTest(tf.test.TestCase):
  """Runs on corpus files written by the test."""

  def _config(self, data_dir, steps=5, **data):
    config = tiny_train_config(steps=steps, checkpoint_every=5)
    data = dict(dict(name="files", data_dir=data_dir, source_lang="src", target_lang="tgt"),
                **data)
    return config.replace(data=dataclasses.replace(config.data, **data))

  def test_changed_corpus_is_refused_unless_accepted(self):
    data_dir, run_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    generated.write_corpus(data_dir, seed=0, train_size=300, valid_size=8, test_size=8,
                           max_length=8)
    Trainer(self._config(data_dir), run_dir, stream=io.StringIO()).train()
    recorded = os.path.join(run_dir, "corpus.json")
    self.assertTrue(os.path.exists(recorded))
    train_src = os.path.join(data_dir, "train.src")
    os.utime(train_src, (1, 1))  # the same bytes, touched: not a change
    Trainer(self._config(data_dir), run_dir, stream=io.StringIO())  # no error
    with open(train_src, "r+", encoding="utf-8") as f:
      lines = f.read().splitlines()
      f.seek(0)
      f.write("\n".join(reversed(lines)) + "\n")  # same size, other content
    with self.assertRaisesRegex(RunDirError, f"The corpus changed since this run began: "
                                f"{train_src} changed .*--accept_changed_corpus"):
      Trainer(self._config(data_dir), run_dir, stream=io.StringIO())
    self.assertFalse(os.path.exists(os.path.join(run_dir, "train.lock")))
    stream = io.StringIO()
    Trainer(self._config(data_dir), run_dir, stream=stream, accept_changed_corpus=True)
    self.assertIn("going on with a changed corpus", stream.getvalue())
    # Accepted once, the new corpus is the run's: the next run goes on without the flag.
    summary = Trainer(self._config(data_dir, steps=7), run_dir, stream=io.StringIO()).train()
    self.assertEqual(summary["steps"], 7)

  def test_every_pair_over_the_length_limits_names_the_limits(self):
    data_dir, run_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    for side in ("src", "tgt"):
      with open(os.path.join(data_dir, f"train.{side}"), "w", encoding="utf-8") as f:
        f.writelines(f"w{i} x y z v w u t s r\n" for i in range(40))
    config = self._config(None, steps=3, train_src=os.path.join(data_dir, "train.src"),
                          train_tgt=os.path.join(data_dir, "train.tgt"))
    config = config.replace(pipeline=dataclasses.replace(config.pipeline, max_source_len=5,
                                                         max_target_len=5))
    with self.assertRaisesRegex(TrainingError, r"^No training batch: every pair of the "
                                r"training split is longer than pipeline.max_source_len=5 or "
                                r"pipeline.max_target_len=5 tokens, or has an empty side; "
                                r"raise the limits .* or check the corpus\.$"):
      Trainer(config, run_dir, stream=io.StringIO()).train()

  def test_train_files_only_trains_without_validation(self):
    data_dir, run_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    paths = generated.write_corpus(data_dir, seed=0, train_size=300, valid_size=8,
                                   test_size=8, max_length=8)
    config = self._config(None, steps=10, train_src=paths["train"][0],
                          train_tgt=paths["train"][1])
    stream = io.StringIO()
    summary = Trainer(config, run_dir, stream=stream).train()
    self.assertEqual(stream.getvalue().count("No validation split: training without "
                                             "validation"), 1)
    self.assertEqual(summary["steps"], 10)
    self.assertIsNone(summary["best_checkpoint"])
    self.assertIsNone(summary["last_validation"])
    self.assertEndsWith(summary["checkpoint"], "ckpt-10")
    # Evaluating its missing test split is one line naming the splits it has.
    from nmt_tf.cli import evaluate as evaluate_cli  # pylint: disable=g-import-not-at-top
    from tests.test_cli_decode import run_command  # pylint: disable=g-import-not-at-top
    code, _, err = run_command(evaluate_cli, run_dir=run_dir, eval_split="test")
    self.assertEqual(code, 2)
    self.assertIn("error: The run's corpus has no 'test' split (it has train); pass "
                  "--eval_split", err)
    self.assertNotIn("Traceback", err)


@pytest.mark.slow  # trains
class DivergenceTest(tf.test.TestCase):

  def test_exploding_loss_warns_once_and_again_after_recovery(self):
    watch = DivergenceWatch(initial_loss=5.3)
    losses = [6.0 - 0.1 * i for i in range(40)] + [1e7] * 60 + [3.0] * 300 + [1e6] * 60
    warnings = [(step, w) for step, loss in enumerate(losses, 1)
                if (w := watch.update(step, loss))]
    self.assertLen(warnings, 2)
    self.assertBetween(warnings[0][0], 41, 80)
    self.assertIn("the training loss is diverging", warnings[0][1])
    self.assertIn("lower train.learning_rate", warnings[0][1])

  def test_loss_exploding_from_the_start_is_measured_against_a_uniform_prediction(self):
    watch = DivergenceWatch(initial_loss=5.3)
    warnings = [w for step, loss in enumerate([2e7] * 40, 1) if (w := watch.update(step, loss))]
    self.assertLen(warnings, 1)
    self.assertIn("x the loss of a uniform prediction, 5.3", warnings[0])

  def test_trainer_warns_of_a_diverging_run(self):
    config = tiny_train_config(steps=30, learning_rate=1e6, eval_every=30, checkpoint_every=30)
    stream = io.StringIO()
    with self.assertNoLogs("absl", level="WARNING"):  # on the console once, not again as a log
      summary = Trainer(config, tempfile.mkdtemp(), stream=stream).train()
    self.assertEqual(summary["steps"], 30)
    self.assertEqual(stream.getvalue().count("WARNING: the training loss is diverging"), 1)

  def test_noisy_or_small_losses_do_not_warn(self):
    watch = DivergenceWatch(initial_loss=5.3)
    losses = [5.0, 0.5, 4.0, 0.4] * 50 + [0.01] * 50 + [0.3] * 50
    self.assertEmpty([w for step, loss in enumerate(losses) if (w := watch.update(step, loss))])

  def test_non_finite_settings_are_config_errors(self):
    config = tiny_train_config()
    for key, value in (("learning_rate", float("inf")), ("clip_norm", float("nan")),
                       ("max_minutes", float("inf"))):
      with self.assertRaisesRegex(ConfigError, f"Received train.{key}={value!r}; expected a "
                                  "finite number"):
        config.from_dict({**config.to_dict(), "train": {**config.to_dict()["train"],
                                                         key: value}})


if __name__ == "__main__":
  tf.test.main()
