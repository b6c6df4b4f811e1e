"""Training on a streamed corpus (files read shard by shard): a run resumed from its saved
stream position ends equal to an uninterrupted run."""

import dataclasses
import io
import json
import os
import tempfile
from unittest import mock

import pytest
import tensorflow as tf

from nmt_tf import data
from nmt_tf.data import shards
from nmt_tf.experiment import corpus_fingerprint
from nmt_tf.training import train
from tests.run_fixtures import scalar, tensorboard_events
from tests.training_fixtures import tiny_train_config, train_until_killed


def _losses(run_dir):
  """{step: train/loss} from the run's TensorBoard event files."""
  return {step: scalar(value) for step, value in tensorboard_events(run_dir)["train/loss"]}


def _files_config(steps, tokenizer=None, **pipeline):
  """(root, config): a generated corpus of 600 training pairs in files under a new root,
  streamed, and the tiny training config of `steps` steps over it with `pipeline` fields
  (and `tokenizer` fields, a dict)."""
  root = tempfile.mkdtemp()
  paths = data.write_corpus(os.path.join(root, "corpus"), seed=1, train_size=600,
                            valid_size=8, test_size=4, max_length=8)
  config = tiny_train_config(steps=steps, eval_every=steps, checkpoint_every=10, seed=3)
  corpus = data.CorpusConfig(name="files", train_src=paths["train"][0],
                             train_tgt=paths["train"][1], valid_src=paths["valid"][0],
                             valid_tgt=paths["valid"][1])
  return root, config.replace(
      data=corpus, tokenizer=dataclasses.replace(config.tokenizer, **(tokenizer or {})),
      pipeline=dataclasses.replace(config.pipeline, **pipeline))


@pytest.mark.slow  # trains three runs
class StreamedResumeTest(tf.test.TestCase):

  def test_resume_at_the_saved_piece_equals_an_uninterrupted_run(self):
    # 4 pieces of 150 pairs, a few batches each: the runs cross pieces and epochs.
    root, config = _files_config(steps=30, shuffle_buffer=150)
    reference = train(config, os.path.join(root, "reference"), stream=io.StringIO())
    run_dir = os.path.join(root, "resumed")
    latest = train_until_killed(config, run_dir, 25, stream=io.StringIO())
    self.assertEndsWith(latest, "ckpt-20")
    reader = tf.train.load_checkpoint(latest)
    saved = json.loads(reader.get_tensor("data_position/.ATTRIBUTES/VARIABLE_VALUE"))
    self.assertEqual((saved["workers"], saved["pieces"], saved["pairs_per_piece"]), (1, 4, 150))
    epoch, batch, _, _ = saved["positions"][0]
    self.assertEqual(int(reader.get_tensor("epoch/.ATTRIBUTES/VARIABLE_VALUE")), epoch)
    self.assertEqual(int(reader.get_tensor("batch_in_epoch/.ATTRIBUTES/VARIABLE_VALUE")),
                     batch)
    stream = io.StringIO()
    resumed = train(config, run_dir, stream=stream)
    self.assertIn("at step 20", stream.getvalue())
    self.assertEqual(resumed["steps"], 30)
    ref, got = _losses(os.path.join(root, "reference")), _losses(run_dir)
    for step in (25, 30):
      self.assertAllClose(got[step], ref[step], rtol=1e-5, msg=f"step {step}")
    self.assertAllClose(resumed["loss"], reference["loss"], rtol=1e-5)

  def test_resume_with_subword_sampling_equals_an_uninterrupted_run(self):
    # The draws of a piece follow its shuffling seed, so a run resumed in the middle of an
    # epoch trains on the same segmentations as the run that was not stopped (in another
    # process too: tests/test_data_segmentation_draws.py).
    root, config = _files_config(steps=20, tokenizer=dict(kind="sentencepiece", vocab_size=120),
                                 shuffle_buffer=300, subword_alpha=0.2, max_source_len=60,
                                 max_target_len=60)
    reference = train(config, os.path.join(root, "reference"), stream=io.StringIO())
    run_dir = os.path.join(root, "resumed")
    self.assertEndsWith(train_until_killed(config, run_dir, 15, stream=io.StringIO()),
                        "ckpt-10")
    resumed = train(config, run_dir, stream=io.StringIO())
    ref, got = _losses(os.path.join(root, "reference")), _losses(run_dir)
    for step in (15, 20):
      self.assertAllClose(got[step], ref[step], rtol=1e-5, msg=f"step {step}")
    self.assertAllClose(resumed["loss"], reference["loss"], rtol=1e-5)

  def test_recorded_line_counts_stand_in_for_reading_the_files_again(self):
    root = tempfile.mkdtemp()
    paths = data.write_corpus(os.path.join(root, "corpus"), seed=1, train_size=50,
                              valid_size=4, test_size=4)
    source, target = paths["train"]
    corpus = {"train": data.open_text_shards([source], [target])}
    corpus_fingerprint.check(root, corpus)
    with open(os.path.join(root, corpus_fingerprint.FILE_NAME), encoding="utf-8") as f:
      self.assertEqual([r["lines"] for r in json.load(f)["train"]["files"]], [50, 50])
    again = {"train": data.open_text_shards([source], [target])}
    with mock.patch.object(shards, "scan_lines", side_effect=AssertionError("read again")):
      corpus_fingerprint.check(root, again)
      self.assertEqual(again["train"].lines, 50)


if __name__ == "__main__":
  tf.test.main()
