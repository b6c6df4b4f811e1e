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
from nmt_tf import data
from nmt_tf.cli import train as train_cli
from nmt_tf.data.text_files import ParallelText
from nmt_tf.experiment import RunDir
from nmt_tf.experiment import parent as parent_lib
from nmt_tf.experiment.run_dir import RunDirError
from nmt_tf.models import vocab_rows
from nmt_tf.training import Trainer
from nmt_tf.export import DEFAULT_MAX_SOURCE_LENGTH, export_run
from nmt_tf.inference.translator import Translator
from tests.release_fixtures import ExportLoader
from tests.run_fixtures import make_tiny_run, tiny_experiment
from tests.test_cli_decode import run_command
from tests.test_write_path import digest
from tests.training_fixtures import tiny_train_config


# Pairs with words the parent never saw.
NEW_PAIRS = (["the quokka jumps"] * 20, ["lo quokka saltas"] * 20)


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

  def test_merge_keeps_the_rows_of_the_parents_tokens(self):
    config = fine_tune_config()
    corpus = data.load_corpus(config.data)
    train = corpus["train"]
    corpus["train"] = ParallelText(train.sources + NEW_PAIRS[0], train.targets + NEW_PAIRS[1])
    trainer = Trainer(config, self.child("merge"), corpus=corpus, init_from=self.parent,
                      update_vocab="merge", stream=open(os.devnull, "w", encoding="utf-8"))
    try:
      trainer._restore(time.time())  # pylint: disable=protected-access
      parent_model, _, src_tok, tgt_tok = RunDir(self.parent).load_model("best")
      for ours, theirs in ((trainer.src_tok, src_tok), (trainer.tgt_tok, tgt_tok)):
        self.assertEqual(ours.vocab[:theirs.vocab_size], theirs.vocab)
        self.assertIn("quokka", ours.vocab[theirs.vocab_size:])
      self.assertEqual(trainer.config.model.src_vocab_size, trainer.src_tok.vocab_size)
      self.assertEqual(trainer.config.model.tgt_vocab_size, trainer.tgt_tok.vocab_size)
      for variable, old in zip(trainer.model.trainable_variables,
                               parent_model.trainable_variables):
        side = vocab_rows.vocabulary_side(variable)
        value, theirs = variable.numpy(), old.numpy()
        if side is None:
          self.assertAllEqual(value, theirs)
          continue
        axis = vocab_rows.VOCABULARY_AXES[variable.path.rsplit("/", 1)[-1]]
        kept = theirs.shape[axis]  # merge: the parent's tokens are the child's first ids
        self.assertAllEqual(np.take(value, range(kept), axis), theirs, variable.path)
    finally:
      trainer._release()  # pylint: disable=protected-access
    record = json.load(open(os.path.join(self.child("merge"), "manifest.json"),
                            encoding="utf-8"))["parent"]
    self.assertEqual(record["update_vocab"], "merge")
    self.assertEqual(digest(self.parent), self.parent_digest)

  def test_replace_drops_the_tokens_the_new_corpus_lacks(self):
    config = fine_tune_config()
    corpus = {"train": ParallelText(*NEW_PAIRS), "valid": ParallelText(*NEW_PAIRS)}
    trainer = Trainer(config, self.child("replace"), corpus=corpus, init_from=self.parent,
                      update_vocab="replace", stream=open(os.devnull, "w", encoding="utf-8"))
    try:
      trainer._restore(time.time())  # pylint: disable=protected-access
      parent_model, _, _, tgt_tok = RunDir(self.parent).load_model("best")
      vocab = trainer.tgt_tok.vocab
      self.assertCountEqual(vocab[4:], ["lo", "quokka", "saltas"])
      table = trainer.model.tgt_embedding.embeddings.numpy()
      theirs = parent_model.tgt_embedding.embeddings.numpy()
      self.assertAllEqual(table[vocab.index("lo")], theirs[tgt_tok.vocab.index("lo")])
      self.assertAllEqual(table[:4], theirs[:4])  # the reserved tokens
    finally:
      trainer._release()  # pylint: disable=protected-access

  def test_update_vocab_needs_a_parent_and_is_kept_on_resume(self):
    code, out, err = run_command(train_cli, run_dir=self.child("lonely"), update_vocab="merge",
                                 config=fine_tune_config().to_dict())
    self.assertEqual((code, out), (2, ""))
    self.assertEqual(err, "error: --update_vocab updates the vocabularies of a parent run; "
                     "give it with --init_from=RUN.\n")
    child = self.child("merged_cli")
    code, _, err = run_command(train_cli, run_dir=child, init_from=self.parent,
                               update_vocab="merge", config=fine_tune_config(steps=2).to_dict())
    self.assertEqual(code, 0, err)
    code, _, err = run_command(train_cli, run_dir=child, init_from=self.parent,
                               config=fine_tune_config(steps=4).to_dict())
    self.assertEqual(code, 2)
    self.assertRegex(err, r"^error: .*merged_cli was initialised with --update_vocab=merge, not "
                     r"no --update_vocab; resume it as it began, or fine-tune into a new "
                     r"--run_dir\.\n$")

  def test_bad_init_from(self):
    for init_from, words in ((self.child("missing"), "is neither a run directory"),
                             (os.path.join(self.parent, "checkpoints", "ckpt-99"),
                              "No checkpoint at")):
      with self.assertRaisesRegex(RunDirError, words):
        parent_lib.resolve(init_from)
    self.assertEqual(parent_lib.resolve(f"{self.parent}:last").checkpoint,
                     os.path.join(self.parent, "checkpoints", "ckpt-10"))
    np.testing.assert_equal(digest(self.parent), self.parent_digest)


@pytest.mark.slow  # trains and exports
class MergedSentencePieceChildTest(tf.test.TestCase):
  """A SentencePiece parent fine-tuned on another language with `merge`: the child's merged
  model trains, exports, and serves from a fresh process with only tensorflow and
  tensorflow_text."""

  def test_export_of_the_child_in_a_fresh_process(self):
    tmp = self.get_temp_dir()
    parent, _, _ = make_tiny_run(os.path.join(tmp, "parent"), tokenizer="sentencepiece")
    files = {}
    for side, lines in (("src", NEW_PAIRS[0] + ["a quokka finds the cows"] * 5),
                        ("tgt", NEW_PAIRS[1] + ["un quokka trovas las vakaj"] * 5)):
      files[f"train_{side}"] = os.path.join(tmp, f"train.{side}")
      with open(files[f"train_{side}"], "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    config = tiny_experiment(tokenizer="sentencepiece")
    config = config.replace(data=dataclasses.replace(config.data, name="files", **files),
                            train=dataclasses.replace(config.train, steps=2))
    child = os.path.join(tmp, "child")
    code, _, err = run_command(train_cli, run_dir=child, init_from=parent.path,
                               update_vocab="merge", config=config.to_dict())
    self.assertEqual(code, 0, err)
    model, child_config, src_tok, tgt_tok = RunDir(child).load_model("last")
    _, parent_tgt = parent.load_tokenizers()
    self.assertGreater(tgt_tok.vocab_size, parent_tgt.vocab_size)
    self.assertEqual(tgt_tok.vocab[:parent_tgt.vocab_size], parent_tgt.vocab)
    path = export_run(child, "last", export_dir=os.path.join(tmp, "export"),
                      report=lambda _: None)
    sentences = ["the quokka jumps", "a quokka finds the cows"]
    translator = Translator(model, src_tok, tgt_tok, child_config.decode,
                            DEFAULT_MAX_SOURCE_LENGTH)
    expected = tf.function(translator.translate)(tf.constant(sentences), beam_size=1)
    served = ExportLoader.answer(path, sentences)  # only tensorflow and tensorflow_text
    self.assertNotIn("error", served, served.get("error"))
    self.assertEqual(served["greedy"],
                     [t.decode() for t in expected["translation"][:, 0].numpy()])


if __name__ == "__main__":
  tf.test.main()
