"""Lexically constrained beam search (dynamic beam allocation) on the fake step functions of
test_decoding_search: the constraint state, every phrase in every output, the exact optimum
with a beam that holds every hypothesis, compaction and XLA."""

import numpy as np
import pytest
import tensorflow as tf

from nmt_tf.decoding import Constraints
from nmt_tf.decoding import decode
from nmt_tf.decoding import lexical
from nmt_tf.special_tokens import EOS_ID

from tests.test_decoding_search import (enumerate_hypotheses, HistoryFake, MarkovFake,
                                        np_score, random_fake)


def make_constraints(sentences, beam_size=1):
  """Constraints from python lists of phrases (lists of tokens), one list per sentence."""
  width = max([sum(len(p) for p in phrases) for phrases in sentences] + [0])
  ids = np.zeros([len(sentences), width], np.int32)
  continues = np.zeros([len(sentences), width], bool)
  for b, phrases in enumerate(sentences):
    at = 0
    for phrase in phrases:
      ids[b, at:at + len(phrase)] = phrase
      continues[b, at:at + len(phrase) - 1] = True
      at += len(phrase)
  return Constraints(tf.constant(ids), tf.constant(continues))


def contains(tokens, phrase):
  tokens = list(tokens)
  return any(tokens[i:i + len(phrase)] == list(phrase) for i in range(len(tokens)))


def search(fake, constraints, beam_size=3, nbest=1, compact=False, **kwargs):
  return decode(fake.step, fake.state(), fake.context(), max_length=fake.max_len,
                batch_size=fake.batch, beam_size=beam_size, nbest=nbest, compact=compact,
                lexical_constraints=constraints, **kwargs)


class ConstraintStateTest(tf.test.TestCase):

  def state_after(self, phrases, tokens):
    rows = lexical.start(make_constraints([phrases]), 1)
    for token in tokens:
      rows = lexical.advance(rows, tf.constant([token]))
    return rows

  def test_phrases_are_met_in_order_and_undone_when_left(self):
    rows = self.state_after([[4, 5, 6], [7]], [4, 5])
    self.assertAllEqual(rows["met"][0], [True, True, False, False, False])
    tokens, ok = lexical.allowed(rows)
    self.assertAllEqual(tf.boolean_mask(tokens[0], ok[0]), [6])  # only the phrase goes on
    rows = lexical.advance(rows, tf.constant([7]))  # leaves the phrase: undone
    self.assertAllEqual(rows["met"][0], [False, False, False, False, False])
    rows = self.state_after([[4, 5, 6], [7]], [7, 9, 4, 5, 6])
    self.assertAllEqual(rows["met"][0], [True, True, True, True, False])
    self.assertTrue(lexical.all_met(rows)[0])

  def test_repeated_tokens_meet_one_constraint_each(self):
    rows = self.state_after([[4], [4]], [4])
    self.assertEqual(int(lexical.num_met(rows)[0]), 1)
    rows = lexical.advance(rows, tf.constant([4]))
    self.assertEqual(int(lexical.num_met(rows)[0]), 2)

  def test_allocation_stripes_over_banks(self):
    scores = tf.constant([[-1.0, -2.0, -3.0, -4.0, -5.0, -float("inf")]])
    met = tf.constant([[0, 0, 0, 1, 2, 2]])
    keep = lexical.allocate(scores, met, 4)  # best of banks 2, 1, 0, then bank 0's second
    self.assertAllEqual(keep, [[4, 3, 0, 1]])


class ConstrainedSearchTest(tf.test.TestCase):

  def test_every_phrase_in_every_output(self):
    for seed, cls in ((0, MarkovFake), (1, HistoryFake), (2, HistoryFake)):
      fake = random_fake(cls, seed, batch=4, max_len=8, vocab=9)
      sentences = [[[4]], [[5, 6]], [[7], [8, 4]], [[4], [4]]]
      for beam_size in (1, 2, 4):
        result = search(fake, make_constraints(sentences), beam_size=beam_size)
        for b, phrases in enumerate(sentences):
          length = int(result.lengths[b, 0])
          tokens = result.ids.numpy()[b, 0, :length]
          self.assertEqual(tokens[-1], EOS_ID)
          for phrase in phrases:
            self.assertTrue(contains(tokens[:-1], phrase), (seed, beam_size, tokens, phrase))

  def test_a_wide_beam_finds_the_constrained_optimum(self):
    sentences = [[[4]], [[5], [4]], []]
    for seed, cls in ((3, MarkovFake), (4, HistoryFake)):
      fake = random_fake(cls, seed, max_len=5)
      result = search(fake, make_constraints(sentences), beam_size=200, nbest=2,
                      length_penalty=0.6)
      for b, phrases in enumerate(sentences):
        hyps = sorted(((np_score(lp, att, 0.6), toks, lp)
                       for toks, lp, att in enumerate_hypotheses(fake, b, fake.max_len)
                       if all(contains(toks[:-1], p) for p in phrases)),
                      key=lambda h: -h[0])
        for n, (score, tokens, log_prob) in enumerate(hyps[:2]):
          self.assertAllEqual(result.ids[b, n, :len(tokens)], tokens)
          self.assertAllClose(result.log_probs[b, n], log_prob, atol=1e-4)
          self.assertAllClose(result.scores[b, n], score, atol=1e-4)

  def test_no_constraint_is_the_plain_beam_search(self):
    fake = random_fake(HistoryFake, seed=5, max_len=6)
    plain = decode(fake.step, fake.state(), fake.context(), max_length=6, beam_size=3,
                   batch_size=fake.batch)
    none = search(fake, make_constraints([[]] * fake.batch), beam_size=3)
    self.assertAllEqual(none.ids[:, 0], plain.ids[:, 0])
    self.assertAllClose(none.scores[:, 0], plain.scores[:, 0], atol=1e-5)

  def test_constraints_that_do_not_fit_still_end(self):
    fake = random_fake(MarkovFake, seed=6, batch=1, max_len=3)
    result = search(fake, make_constraints([[[4, 5, 4, 5]]]))
    self.assertEqual(int(result.ids[0, 0, int(result.lengths[0, 0]) - 1]), EOS_ID)

  @pytest.mark.slow  # traces and XLA-compiles the constrained search
  def test_compaction_graphs_and_xla_agree(self):
    fake = random_fake(HistoryFake, seed=7, batch=5, max_len=8, vocab=9, scale=1.0)
    constraints = make_constraints([[[4]], [], [[5, 6]], [[7], [8]], [[4, 4]]])
    expected = search(fake, constraints, beam_size=3, nbest=2)
    compacted = tf.function(lambda: search(fake, constraints, beam_size=3, nbest=2,
                                           compact=True), autograph=False)()
    for a, b in zip(compacted, expected):
      self.assertAllClose(a, b, atol=1e-6)
    jit = tf.function(lambda: search(fake, constraints, beam_size=3, nbest=2),
                      jit_compile=True, autograph=False)()
    for a, b in zip(jit, expected):
      self.assertAllClose(a, b, atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
