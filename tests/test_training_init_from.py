"""Fine-tuning (`train --init_from`): a new run starts from a trained run's weights, keeps its
model and vocabularies, records it, and leaves it untouched."""

import dataclasses
import json
import os
import tempfile
import time

import numpy as np
import pytest
import tensorflow as tf

import nmt_tf
from nmt_tf.cli import train as train_cli
from nmt_tf.experiment import RunDir
from nmt_tf.experiment import parent as parent_lib
from nmt_tf.experiment.run_dir import RunDirError
from nmt_tf.training import Trainer
from tests.test_cli_decode import run_command
from tests.test_write_path import digest
from tests.training_fixtures import tiny_train_config


def fine_tune_config(steps=4, **model):
  """The parent's recipe on other data (another seed of the generated pair)."""
  config = tiny_train_config(steps=steps, checkpoint_every=2, eval_every=steps)
  config = config.replace(data=dataclasses.replace(config.data, seed=7))
  return config.replace(model=config.model.replace(**model)) if model else config


@pytest.mark.slow  # trains a parent and children
class InitFromTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.parent = os.path.join(cls.tmp, "parent")
    with open(os.devnull, "w", encoding="utf-8") as log:
      nmt_tf.train(tiny_train_config(steps=10, checkpoint_every=10, eval_every=10), cls.parent,
                   stream=log)
    cls.parent_digest = digest(cls.parent)

  def child(self, name):
    return os.path.join(self.tmp, name)

  def test_the_child_starts_from_the_parents_weights(self):
    trainer = Trainer(fine_tune_config(dropout=0.1), self.child("start"),
                      init_from=self.parent, stream=open(os.devnull, "w", encoding="utf-8"))
    try:
      trainer._restore(time.time())  # pylint: disable=protected-access
      parent_model, _, _, _ = RunDir(self.parent).load_model("best")
      self.assertEqual(len(trainer.model.weights), len(parent_model.weights))
      for ours, theirs in zip(trainer.model.weights, parent_model.weights):
        self.assertAllEqual(ours, theirs)
      self.assertEqual(trainer.config.model.dropout, 0.1)  # a tunable field is the child's
      self.assertEqual(trainer.config.data.seed, 7)  # the data are the child's
      self.assertEqual(int(trainer.optimizer.iterations), 0)  # the optimizer starts anew
    finally:
      trainer._release()  # pylint: disable=protected-access
    with open(os.path.join(self.child("start"), "vocab", "tokenizers.json"), "rb") as ours, \
        open(os.path.join(self.parent, "vocab", "tokenizers.json"), "rb") as theirs:
      self.assertEqual(ours.read(), theirs.read())
    self.assertEqual(digest(self.parent), self.parent_digest)

  def test_train_resume_and_the_record(self):
    child = self.child("resumed")
    code, out, err = run_command(train_cli, run_dir=child, init_from=self.parent,
                                 config=fine_tune_config(steps=2).to_dict())
    self.assertEqual(code, 0, err)
    record = json.load(open(os.path.join(child, "manifest.json"), encoding="utf-8"))["parent"]
    self.assertEqual(record["run_dir"], os.path.abspath(self.parent))
    self.assertTrue(record["checkpoint"].startswith("best/ckpt-"))
    self.assertIn("vocab/tokenizers.json", record["checksums"])
    code, out, err = run_command(train_cli, run_dir=child, init_from=self.parent,
                                 config=fine_tune_config(steps=4).to_dict())
    self.assertEqual(code, 0, err)
    self.assertEqual(json.loads(out[out.rindex("\n{") + 1:])["steps"], 4)
    self.assertIn("Resumed from", out)
    self.assertEqual(digest(self.parent), self.parent_digest)
    # Another parent for the same child is refused; so is --init_from into a run of its own.
    code, _, err = run_command(train_cli, run_dir=child, init_from=f"{self.parent}:last",
                               config=fine_tune_config(steps=6).to_dict())
    self.assertEqual(code, 2)
    self.assertRegex(err, r"^error: .*resumed was initialised from .*/parent/best/ckpt-10, not "
                     r".*/parent/checkpoints/ckpt-10; fine-tune into a new --run_dir, or give "
                     r"that --init_from\.\n$")
    code, _, err = run_command(train_cli, run_dir=self.parent, init_from=child,
                               config=tiny_train_config(steps=12).to_dict())
    self.assertEqual(code, 2)
    self.assertRegex(err, r"^error: .*/parent has trained without --init_from; fine-tune into "
                     r"a new --run_dir, or leave --init_from out to resume it\.\n$")
    self.assertEqual(digest(self.parent), self.parent_digest)

  def test_a_model_shape_flag_is_refused(self):
    code, out, err = run_command(train_cli, run_dir=self.child("shape"), init_from=self.parent,
                                 config=fine_tune_config(decoder_units=48).to_dict())
    self.assertEqual((code, out), (2, ""))
    self.assertEqual(err, f"error: model.decoder_units is 48 here and 64 in the parent "
                     f"{self.parent}: a fine-tuned run keeps its parent's model; leave it out "
                     "or give the parent's recipe (only dropout and hard_inference settings may "
                     "change).\n")
    self.assertFalse(os.path.exists(os.path.join(self.child("shape"), "vocab")))

  def test_bad_init_from(self):
    for init_from, words in ((self.child("missing"), "is neither a run directory"),
                             (os.path.join(self.parent, "checkpoints", "ckpt-99"),
                              "No checkpoint at")):
      with self.assertRaisesRegex(RunDirError, words):
        parent_lib.resolve(init_from)
    self.assertEqual(parent_lib.resolve(f"{self.parent}:last").checkpoint,
                     os.path.join(self.parent, "checkpoints", "ckpt-10"))
    np.testing.assert_equal(digest(self.parent), self.parent_digest)


if __name__ == "__main__":
  tf.test.main()
