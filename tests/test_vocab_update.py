"""Vocabulary update of a fine-tuned run: merged and replaced vocabularies (word and
SentencePiece), the map of rows by surface string, and the transfer of a model's rows."""

import numpy as np
import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.data import SentencePieceTokenizer, TokenizerConfig, WordTokenizer
from nmt_tf.data.text_files import ParallelText
from nmt_tf.data import vocab_update
from nmt_tf.experiment import base_config
from nmt_tf.experiment.presets import MODELS
from nmt_tf.models import build_model
from nmt_tf.models.config import ModelConfig
from nmt_tf.models import vocab_rows

OLD = ["a dog runs on the grass .", "the man rides a red bike .", "two girls play ball ."] * 20
NEW = ["un chien court sur l' herbe .", "the man sleeps .", "deux filles jouent ."] * 20


def word(texts):
  return WordTokenizer.build(texts, max_size=100)


def pieces(texts):
  return SentencePieceTokenizer.train(texts, vocab_size=40, model_type="unigram",
                                      character_coverage=1.0)


class ExtendedTest(tf.test.TestCase):

  def test_word_vocabulary_keeps_ids_and_appends_new_words(self):
    old, new = word(OLD), word(NEW)
    merged = old.extended(new)
    self.assertEqual(merged.vocab[:old.vocab_size], old.vocab)
    added = merged.vocab[old.vocab_size:]
    self.assertEqual(added, [w for w in new.vocab if w not in old.vocab])
    self.assertIn("chien", added)
    self.assertNotIn("man", added)
    self.assertEqual(merged.encode("the man sleeps ."),
                     [merged.vocab.index(w) for w in ("the", "man", "sleeps", ".")])

  def test_sentencepiece_model_holds_the_pieces_of_both(self):
    old, new = pieces(OLD), pieces(NEW)
    merged = old.extended(new)
    self.assertEqual(merged.vocab[:old.vocab_size], old.vocab)
    self.assertEqual(set(merged.vocab), set(old.vocab) | set(new.vocab))
    self.assertEqual(merged.vocab_size, len(set(merged.vocab)))
    for text in OLD[:3] + NEW[:3]:  # both languages round-trip, in Python and in-graph
      ids = merged.encode(text)
      self.assertNotIn(special_tokens.UNK_ID, ids)
      self.assertEqual(merged.decode(ids), text)
      self.assertEqual(merged.tokenize(tf.constant([text])).to_list(), [ids])


class UpdateTokenizersTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.split = ParallelText(NEW, NEW, "new")
    self.config = TokenizerConfig(kind="word", vocab_size=100)

  def test_merge_and_replace(self):
    source, target = word(OLD), word(OLD)
    merged = vocab_update.update_tokenizers("merge", source, target, self.config, self.split)
    self.assertEqual(merged[0].vocab[:source.vocab_size], source.vocab)
    self.assertIn("chien", merged[0].vocab)
    replaced = vocab_update.update_tokenizers("replace", source, target, self.config,
                                              self.split)
    self.assertEqual(replaced[1].vocab, word(NEW).vocab)
    self.assertNotIn("dog", replaced[1].vocab)

  def test_a_shared_vocabulary_stays_shared(self):
    shared = word(OLD)
    config = TokenizerConfig(kind="word", vocab_size=100, shared=True)
    for mode in vocab_update.MODES:
      source, target = vocab_update.update_tokenizers(mode, shared, shared, config, self.split)
      self.assertIs(source, target)

  def test_row_map(self):
    old, new = word(OLD), word(NEW)
    rows = vocab_update.row_map(old, new)
    self.assertEqual(rows.shape, (new.vocab_size,))
    self.assertEqual(rows[:4].tolist(), [0, 1, 2, 3])  # the reserved tokens
    for token, row in zip(new.vocab, rows):
      self.assertEqual(row, old.vocab.index(token) if token in old.vocab else -1)

  def test_unknown_mode(self):
    with self.assertRaisesRegex(ValueError, "update_vocab='grow'"):
      vocab_update.update_tokenizers("grow", word(OLD), word(OLD), self.config, self.split)


def tiny_model(preset, src, tgt, **fields):
  config = dict(base_config(preset).model)
  config.update({**dict(src_vocab_size=src, tgt_vocab_size=tgt, embedding_dim=8,
                        encoder_units=6, decoder_units=10), **fields})
  return build_model(ModelConfig(**config))


class TransferTest(tf.test.TestCase):

  def test_every_vocabulary_sized_weight_is_known(self):
    # Vocabulary sizes no other dimension has: any weight with one is vocabulary-indexed.
    for preset in MODELS:
      for fields in (dict(), dict(lexical_model=preset != "encdec", tie_embeddings="none")):
        model = tiny_model(preset, 101, 103, **fields)
        for variable in model.trainable_variables:
          side = vocab_rows.vocabulary_side(variable)
          sized = [i for i, n in enumerate(variable.shape) if n in (101, 103)]
          if side is None:
            self.assertEqual(sized, [], f"{preset}: {variable.path}")
            continue
          axis = vocab_rows.VOCABULARY_AXES[variable.path.rsplit("/", 1)[-1]]
          self.assertEqual(variable.shape[axis], 101 if side == "source" else 103,
                           f"{preset}: {variable.path}")

  def test_rows_follow_their_tokens(self):
    parent = tiny_model("cgru", 11, 13, lexical_model=True, tie_embeddings="none")
    child = tiny_model("cgru", 9, 15, lexical_model=True, tie_embeddings="none")
    initial = {v.path: v.numpy() for v in child.variables}
    source = np.array([0, 1, 2, 3, 10, -1, 4, -1, 7])
    target = np.array([0, 1, 2, 3, 12, 11, -1, -1, -1, 4, 5, 6, 7, 8, -1])
    vocab_rows.transfer(parent, child, {"source": source, "target": target})
    old = {v.path: v.numpy() for v in parent.variables}
    for variable in child.variables:
      path, value = variable.path, variable.numpy()
      side = vocab_rows.vocabulary_side(variable)
      if side is None:
        self.assertAllEqual(value, old[path])
        continue
      index = source if side == "source" else target
      axis = vocab_rows.VOCABULARY_AXES[path.rsplit("/", 1)[-1]]
      for row, parent_row in enumerate(index):
        expected = initial[path] if parent_row < 0 else old[path]
        self.assertAllEqual(np.take(value, row, axis),
                            np.take(expected, row if parent_row < 0 else parent_row, axis),
                            f"{path} row {row}")

  def test_another_model_is_refused(self):
    parent = tiny_model("cgru", 11, 13)
    child = tiny_model("cgru", 11, 13, decoder_units=12)
    rows = {"source": np.arange(11), "target": np.arange(13)}
    with self.assertRaisesRegex(ValueError, "does not match the child's"):
      vocab_rows.transfer(parent, child, rows)


if __name__ == "__main__":
  tf.test.main()
