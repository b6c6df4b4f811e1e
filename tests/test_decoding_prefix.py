"""A forced target prefix and per-token log-probabilities in greedy and beam search, on the
fake step functions of test_decoding_search (no model): exact optima among the hypotheses
that start with the prefix, the completing step's allowed tokens, compaction and graphs."""

import numpy as np
import pytest
import tensorflow as tf

from nmt_tf.decoding import decode
from nmt_tf.decoding import Prefix
from nmt_tf.special_tokens import EOS_ID

from tests.test_decoding_search import (enumerate_hypotheses, HistoryFake, MarkovFake,
                                        np_log_softmax, np_score, random_fake, rescore)


def make_prefix(rows, vocab, completion=None, steps=None):
  """A Prefix from python lists of forced tokens, and optional sets of the tokens allowed
  after them (None = any): one set per completing step (`steps`, default one set), every
  token one byte long."""
  width = max([len(r) for r in rows] + [0])
  ids = np.zeros([len(rows), width], np.int32)
  for b, row in enumerate(rows):
    ids[b, :len(row)] = row
  lengths = tf.constant([len(r) for r in rows], tf.int32)
  if completion is None:
    return Prefix(tf.constant(ids), lengths)
  steps = steps or [[allowed] if allowed is not None else [] for allowed in completion]
  mask = np.zeros([len(rows), max(max(len(s) for s in steps), 1), vocab], bool)
  for b, sets in enumerate(steps):
    for o, allowed in enumerate(sets):
      mask[b, o, list(allowed)] = True
  return Prefix(tf.constant(ids), lengths, tf.constant(mask),
                tf.constant([len(s) for s in steps], tf.int32), tf.ones([vocab], tf.int32))


def search(fake, prefix=None, beam_size=1, nbest=1, compact=False, **kwargs):
  return decode(fake.step, fake.state(), fake.context(), max_length=fake.max_len,
                batch_size=fake.batch, beam_size=beam_size, nbest=nbest, compact=compact,
                prefix=prefix, **kwargs)


def token_log_probs(fake, b, tokens):
  """Reference log p(y_t | y_<t) of each token."""
  return [np_log_softmax(fake.np_step(b, tuple(tokens[:t]))[0])[tokens[t]]
          for t in range(len(tokens))]


class PrefixSearchTest(tf.test.TestCase):

  def test_beam_optimum_among_prefixed_hypotheses(self):
    prefixes = [[4], [5, 4], []]
    completion = [None, None, [4, 5]]  # sentence 2: its first token is 4 or 5
    for seed, cls in ((0, MarkovFake), (1, HistoryFake)):
      fake = random_fake(cls, seed, max_len=5)
      prefix = make_prefix(prefixes, fake.vocab, completion)
      result = search(fake, prefix, beam_size=200, nbest=3, length_penalty=0.6)
      for b in range(fake.batch):
        start = prefixes[b]
        hyps = [(np_score(lp, att, 0.6), toks, lp)
                for toks, lp, att in enumerate_hypotheses(fake, b, fake.max_len)
                if list(toks[:len(start)]) == start
                and (completion[b] is None or toks[len(start)] in completion[b])]
        hyps.sort(key=lambda h: -h[0])
        for n, (score, tokens, log_prob) in enumerate(hyps[:3]):
          self.assertAllEqual(result.ids[b, n, :len(tokens)], tokens)
          self.assertAllClose(result.log_probs[b, n], log_prob, atol=1e-4)  # prefix included
          self.assertAllClose(result.scores[b, n], score, atol=1e-4)

  def test_greedy_starts_with_the_prefix(self):
    fake = random_fake(HistoryFake, seed=2, max_len=6)
    prefixes = [[5, 5, 4], [4], []]
    result = search(fake, make_prefix(prefixes, fake.vocab))
    for b, start in enumerate(prefixes):
      length = int(result.lengths[b, 0])
      tokens = result.ids.numpy()[b, 0, :length]
      self.assertAllEqual(tokens[:len(start)], start)
      self.assertEqual(tokens[-1], EOS_ID)
      for t in range(len(start), length):  # after the prefix, the arg-max of each step
        logits, _ = fake.np_step(b, tuple(tokens[:t]))
        allowed = np_log_softmax(logits)
        allowed[:EOS_ID] = -np.inf
        allowed[EOS_ID + 1:4] = -np.inf  # BOS and PAD are never outputs
        if t == fake.max_len - 1:
          allowed[np.arange(fake.vocab) != EOS_ID] = -np.inf
        self.assertEqual(tokens[t], int(np.argmax(allowed)))
      self.assertAllClose(result.log_probs[b, 0], rescore(fake, b, tokens)[0], atol=1e-5)

  def test_prefix_of_the_output_gives_the_output(self):
    for beam_size in (1, 4):
      fake = random_fake(HistoryFake, seed=3, max_len=6)
      free = search(fake, beam_size=beam_size)
      for k in (1, 2, 3):
        rows = [list(free.ids.numpy()[b, 0, :min(k, int(free.lengths[b, 0]) - 1)])
                for b in range(fake.batch)]
        forced = search(fake, make_prefix(rows, fake.vocab), beam_size=beam_size)
        self.assertAllEqual(forced.ids, free.ids)
        self.assertAllClose(forced.scores, free.scores, atol=1e-5)

  def test_completion_restricts_one_step(self):
    fake = random_fake(MarkovFake, seed=4, batch=2, max_len=5)
    prefix = make_prefix([[4], [5]], fake.vocab, [[5], None])
    for beam_size in (1, 3):
      result = search(fake, prefix, beam_size=beam_size)
      self.assertAllEqual(result.ids[0, 0, :2], [4, 5])
      self.assertEqual(int(result.ids[1, 0, 0]), 5)

  def test_completion_follows_the_bytes_emitted(self):
    # A stem of 3 bytes: tokens 4 and 5 are one byte long, token 6 is two; after [4] the
    # offset is 1 (only 6 then 5 allowed: "spells"), after [4, 6] the stem is complete.
    fake = random_fake(MarkovFake, seed=8, batch=1, max_len=6, vocab=8)
    mask = np.zeros([1, 3, 8], bool)
    mask[0, 0, 4] = mask[0, 1, 6] = mask[0, 2, 5] = True
    piece_bytes = tf.constant([1 << 20] * 4 + [1, 1, 2, 1], tf.int32)
    prefix = Prefix(tf.zeros([1, 0], tf.int32), tf.constant([0]), tf.constant(mask),
                    tf.constant([3]), piece_bytes)
    for beam_size in (1, 3):
      result = search(fake, prefix, beam_size=beam_size)
      self.assertAllEqual(result.ids[0, 0, :2], [4, 6])  # 1 + 2 bytes: done
    mask[0, 1] = False
    mask[0, 1, 5] = True  # 4, 5 (2 bytes), then row 2
    result = search(fake, Prefix(tf.zeros([1, 0], tf.int32), tf.constant([0]),
                                 tf.constant(mask), tf.constant([3]), piece_bytes))
    self.assertAllEqual(result.ids[0, 0, :3], [4, 5, 5])

  def test_a_long_prefix_raises_the_length_limit(self):
    fake = random_fake(MarkovFake, seed=5, batch=1, max_len=6)
    prefix = make_prefix([[4, 5, 4, 5]], fake.vocab)
    result = search(fake, prefix, src_length=tf.constant([1]), max_length_a=1.0)
    self.assertAllEqual(result.ids[0, 0, :5], [4, 5, 4, 5, EOS_ID])

  def test_token_log_probs_sum_to_the_log_prob(self):
    fake = random_fake(HistoryFake, seed=6, max_len=6)
    for beam_size in (1, 3):
      result = search(fake, make_prefix([[4], [], [5, 5]], fake.vocab), beam_size=beam_size,
                      nbest=min(beam_size, 2))
      self.assertAllClose(tf.reduce_sum(result.token_log_probs, -1), result.log_probs,
                          atol=1e-5)
      for b in range(fake.batch):
        length = int(result.lengths[b, 0])
        tokens = result.ids.numpy()[b, 0, :length]
        self.assertAllClose(result.token_log_probs[b, 0, :length],
                            token_log_probs(fake, b, tokens), atol=1e-5)
        self.assertAllEqual(result.token_log_probs[b, 0, length:], np.zeros(6 - length))

  @pytest.mark.slow  # traces the prefixed search with and without compaction
  def test_compaction_and_graphs_agree(self):
    fake = random_fake(HistoryFake, seed=7, batch=5, max_len=7, scale=1.0)
    prefix = make_prefix([[4], [], [5, 4], [4, 4, 4], []], fake.vocab,
                         [None, [4, 5], None, [5], None])
    for beam_size in (1, 3):
      expected = search(fake, prefix, beam_size=beam_size)
      compacted = tf.function(lambda: search(fake, prefix, beam_size=beam_size, compact=True),
                              autograph=False)()
      for a, b in zip(compacted, expected):
        self.assertAllClose(a, b, atol=1e-6)
      jit = tf.function(lambda: search(fake, prefix, beam_size=beam_size),
                        jit_compile=True, autograph=False)()
      for a, b in zip(jit, expected):
        self.assertAllClose(a, b, atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
