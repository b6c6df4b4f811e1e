"""The vocabulary shortlist: its table (Dice over sentence co-occurrences), the vocabulary of a
batch, the output layers restricted to it, and the Translator's search over it, which must be
the full search with every word outside the shortlist given probability zero."""

from unittest import mock

import keras
import numpy as np
import tensorflow as tf

from nmt_tf.experiment import DecodeConfig
from nmt_tf.inference import shortlist
from nmt_tf.inference import Shortlist
from nmt_tf.inference import Translator
from nmt_tf.layers import kernels
from nmt_tf.layers.deep_output import DeepOutput, OutputProjection
from nmt_tf.layers.lexical import LexicalModel
from nmt_tf.models import ModelConfig
from nmt_tf.models.config import ConfigError
from nmt_tf.models.seq2seq import Seq2Seq
from nmt_tf.special_tokens import EOS_ID

# Three sentence pairs over source ids 4, 5 and target ids 6, 7, 8:
#   c(4) = c(5) = 2, c(6) = c(7) = 2, c(8) = 1; c(4,6) = 2, c(4,7) = 1, c(5,6) = 1,
#   c(5,7) = 2, c(5,8) = 1; Dice(4,6) = 1, Dice(4,7) = 1/2, Dice(5,7) = 1, Dice(5,8) = 2/3,
#   Dice(5,6) = 1/2.
SOURCES = [[4, 5, 5], [4], [5]]
TARGETS = [[6, 7], [6, 6], [7, 8]]


class BuildTableTest(tf.test.TestCase):

  def test_translations_by_decreasing_dice(self):
    table, frequent = shortlist.build_table(SOURCES, TARGETS, 6, 9, candidates=4)
    self.assertAllEqual(table[4], [6, 7, EOS_ID, EOS_ID])
    self.assertAllEqual(table[5], [7, 8, 6, EOS_ID])
    for word in (0, 1, 2, 3):  # never seen: EOS only
      self.assertAllEqual(table[word], [EOS_ID] * 4)
    self.assertAllEqual(frequent[:3], [6, 7, 8])  # 3, 2 and 1 occurrences
    self.assertCountEqual(frequent, range(9))

  def test_counts_merged_across_chunks(self):
    whole = shortlist.build_table(SOURCES * 5, TARGETS * 5, 6, 9, candidates=4)
    with mock.patch.object(shortlist, "_CHUNK", 2):
      chunked = shortlist.build_table(SOURCES * 5, TARGETS * 5, 6, 9, candidates=4)
    for a, b in zip(whole, chunked):
      self.assertAllEqual(a, b)

  def test_vocabulary_of_a_batch(self):
    table, frequent = shortlist.build_table(SOURCES, TARGETS, 6, 9, candidates=4)
    one = Shortlist(table, frequent, per_source=1, num_frequent=0)
    self.assertAllEqual(one.vocabulary(tf.constant([[4, EOS_ID, 0]])), [0, 1, 2, 3, 6])
    self.assertAllEqual(one.vocabulary(tf.constant([[5, EOS_ID], [4, EOS_ID]])),
                        [0, 1, 2, 3, 6, 7])
    two = Shortlist(table, frequent, per_source=2, num_frequent=1)
    self.assertAllEqual(two.vocabulary(tf.constant([[5, EOS_ID]])), [0, 1, 2, 3, 6, 7, 8])
    with self.assertRaisesRegex(ValueError, "per_source=5; expected 1 to 4"):
      Shortlist(table, frequent, per_source=5, num_frequent=0)

  def test_config_bounds(self):
    self.assertEqual(DecodeConfig().shortlist, 0)  # off: the exact search
    for bad in (dict(shortlist=-1), dict(shortlist=101), dict(shortlist_frequent=-1)):
      with self.assertRaisesRegex(ConfigError, "decode.shortlist"):
        DecodeConfig(**bad)


class RestrictedOutputTest(tf.test.TestCase):
  """Each output layer called with `vocab` gives the columns `vocab` of its full logits."""

  def test_output_layers(self):
    vocab = tf.constant([0, 1, 2, 3, 7, 11, 12])
    x = {"s": tf.random.normal([5, 6]), "c": tf.random.normal([5, 4])}
    embedding = keras.layers.Embedding(13, 8)
    embedding.build(None)
    untied = DeepOutput(["s", "c"], 8, 13)
    tied = DeepOutput(["s", "c"], 8, 13, tied=True)
    tied.tie(embedding)
    projection = OutputProjection(13)
    tied_projection = OutputProjection(13, tied=True)
    tied_projection.tie(embedding)
    lexical = LexicalModel(13)
    attention = tf.nn.softmax(tf.random.normal([5, 3]))
    memory = tf.random.normal([5, 3, 8])
    calls = [
        lambda **kw: untied(x, **kw),
        lambda **kw: tied(x, **kw),
        lambda **kw: projection(x["s"], **kw),
        lambda **kw: tied_projection(tf.random.stateless_normal([5, 8], [1, 2]), **kw),
        lambda **kw: lexical(attention, memory, **kw),
    ]
    for dtype in (None, "bfloat16"):
      for call in calls:
        with kernels.precision_scope(dtype):
          full = call()
          part = call(vocab=vocab)
        self.assertAllClose(part, tf.gather(full, vocab, axis=-1))


class MaskedModel:
  """The model with every logit outside `vocab` at -inf: the full search over the shortlist's
  words, the reference of the Translator's search over their positions."""

  def __init__(self, model, vocab):
    self.model, self.matmul_dtype = model, None
    self.trainable_variables = model.trainable_variables
    self.inside = tf.scatter_nd(vocab[:, tf.newaxis], tf.ones_like(vocab),
                                [model.model_config.tgt_vocab_size]) > 0  # [V]
    self.encode, self.initial_state = model.encode, model.initial_state

  def step(self, prev_ids, state, context, time):
    logits, attention, state = self.model.step(prev_ids, state, context, time)
    return tf.where(self.inside, logits, -np.inf), attention, state


class TranslatorShortlistTest(tf.test.TestCase):

  def test_search_over_the_shortlist_is_the_masked_full_search(self):
    tf.random.set_seed(3)
    model = Seq2Seq(ModelConfig(src_vocab_size=30, tgt_vocab_size=40, embedding_dim=8,
                                encoder_units=8, decoder_units=16, lexical_model=True))
    model.build_with_dummy_batch()
    rng = np.random.RandomState(0)
    table = rng.randint(4, 40, size=[30, 3]).astype(np.int32)
    frequent = rng.permutation(40).astype(np.int32)
    short = Shortlist(table, frequent, per_source=2, num_frequent=3)
    source = tf.constant([[5, 9, 11, EOS_ID], [7, EOS_ID, 0, 0], [20, 21, 22, EOS_ID]])
    vocab = short.vocabulary(source)
    self.assertLess(int(tf.shape(vocab)[0]), 40)
    for beam_size in (1, 3):
      decode = DecodeConfig(beam_size=beam_size, nbest=1, max_length=12, max_length_a=2.0,
                            max_length_b=4.0)
      got = Translator(model, None, None, decode, shortlist=short).translate_ids(source)
      expected = Translator(MaskedModel(model, vocab), None, None, decode).translate_ids(source)
      self.assertAllEqual(got.ids, expected.ids)
      self.assertAllEqual(got.lengths, expected.lengths)
      self.assertAllClose(got.scores, expected.scores, atol=1e-5)
      self.assertAllClose(got.attention, expected.attention, atol=1e-6)
      inside = np.isin(got.ids.numpy(), vocab.numpy())
      self.assertTrue(inside.all())


if __name__ == "__main__":
  tf.test.main()
