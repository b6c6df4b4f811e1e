"""The upgrade of older run directories (experiment/upgrade.py): the named steps on config
values, the run format in the manifest, a run of the oldest format that opens and trains on,
and a run of a newer format refused with one line."""

import dataclasses
import io
import json
import os
import tempfile

import pytest
import tensorflow as tf

from nmt_tf import manifest
from nmt_tf.experiment import ExperimentConfig, RunDir, RunDirError, upgrade
from nmt_tf.models.config import ConfigError
from nmt_tf.training import Trainer
from nmt_tf.write_path import write_json
from tests.training_fixtures import tiny_train_config


def as_oldest_format(run_path):
  """Rewrites a run as the oldest format records it: REINFORCE settings in the train
  section, the settings removed since at their inert values, no run_format."""
  with open(os.path.join(run_path, "config.json"), encoding="utf-8") as f:
    values = json.load(f)
  for old, new in upgrade.REINFORCE_KEYS.items():
    values["train"][old] = values["reinforce"][new]
  del values["reinforce"]
  values["decode"]["matmul_dtype"] = None
  values["pipeline"]["reverse_source"] = False
  write_json(os.path.join(run_path, "config.json"), values)
  rec = manifest.read(run_path)
  del rec["run_format"]
  write_json(os.path.join(run_path, manifest.FILE), rec)


class StepsTest(tf.test.TestCase):

  def test_every_step_from_the_oldest_format(self):
    config = tiny_train_config()
    values = config.to_dict()
    train = dict(values["train"], reinforce_weight=0.5, reinforce_samples=2,
                 attention_entropy_weight=0.1)
    oldest = dict(values, train=train, decode=dict(values["decode"], matmul_dtype="float32"))
    del oldest["reinforce"]
    got = upgrade.upgrade_config(oldest)
    self.assertEqual(got["reinforce"], {"weight": 0.5, "samples": 2, "entropy_weight": 0.1})
    self.assertNotIn("reinforce_weight", got["train"])
    self.assertNotIn("matmul_dtype", got["decode"])
    self.assertNotIn("reinforce", oldest)  # the caller's values are left as they were
    # Values of the current format go through every step unchanged.
    self.assertEqual(upgrade.upgrade_config(values), values)
    self.assertEqual(upgrade.upgrade_config(values, upgrade.FORMAT), values)

  def test_a_setting_in_both_places_and_formats_out_of_reach(self):
    values = {"train": {"reinforce_weight": 0.5}, "reinforce": {"weight": 0.2}}
    with self.assertRaisesRegex(ConfigError, r"sets both train\.reinforce_weight and "
                                r"reinforce\.weight; keep reinforce\.weight only\.$"):
      upgrade.upgrade_config(values)
    with self.assertRaisesRegex(ConfigError, f"was written by a newer release of nmt_tf \\(run "
                                f"format {upgrade.FORMAT + 1}; this one reads up to "
                                f"{upgrade.FORMAT}\\)"):
      upgrade.upgrade_config({}, upgrade.FORMAT + 1)
    with self.assertRaisesRegex(ConfigError, "run_format='2'; expected a positive integer"):
      upgrade.upgrade_config({}, "2")

  def test_old_keys_are_read_through_the_config(self):
    config = ExperimentConfig.from_dict({"model": {"attention_mode": "hard"},
                                         "train": {"reinforce_reward": "word"}})
    self.assertEqual(config.reinforce.reward, "word")


@pytest.mark.slow  # trains
class OldestRunTest(tf.test.TestCase):

  def test_a_run_of_the_oldest_format_opens_and_trains_on(self):
    config = tiny_train_config(steps=10, eval_every=10, checkpoint_every=10)
    config = config.replace(
        model=dataclasses.replace(config.model, attention_mode="hard"),
        reinforce=dataclasses.replace(config.reinforce, reward="word_mean", baseline_decay=0.9))
    run_path = tempfile.mkdtemp()
    Trainer(config, run_path, stream=io.StringIO()).train()
    as_oldest_format(run_path)
    run = RunDir(run_path)
    self.assertEqual(run.run_format(), 1)
    loaded = run.load_config()
    self.assertEqual(loaded.reinforce, config.reinforce)
    run.load_model("last")  # the manifest's checksums hold
    longer = config.replace(train=dataclasses.replace(config.train, steps=20))
    stream = io.StringIO()
    summary = Trainer(longer, run_path, stream=stream).train()
    self.assertIn("Resumed from", stream.getvalue())
    self.assertEqual(summary["steps"], 20)
    # Written back in the current format.
    self.assertEqual(run.run_format(), upgrade.FORMAT)
    with open(run.config_path, encoding="utf-8") as f:
      values = json.load(f)
    self.assertEqual(values["reinforce"]["reward"], "word_mean")
    self.assertFalse(set(values["train"]) & set(upgrade.REINFORCE_KEYS))

  def test_a_run_of_a_newer_format_is_refused(self):
    config = tiny_train_config(steps=2, eval_every=2, checkpoint_every=2)
    run_path = tempfile.mkdtemp()
    Trainer(config, run_path, stream=io.StringIO()).train()
    rec = manifest.read(run_path)
    rec["run_format"] = upgrade.FORMAT + 1
    write_json(os.path.join(run_path, manifest.FILE), rec)
    with self.assertRaisesRegex(RunDirError, "manifest.json was written by a newer release"):
      RunDir(run_path).load_model()
    with self.assertRaisesRegex(RunDirError, "manifest.json was written by a newer release"):
      Trainer(config, run_path, stream=io.StringIO())


if __name__ == "__main__":
  tf.test.main()
