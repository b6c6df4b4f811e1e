"""Greedy and beam search on fake step functions (no model): exact ids, lengths and
log-probabilities, length constraints, penalties, state reordering, exhaustive optimum,
XLA compilation and retracing."""

import itertools
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from nmt_tf.decoding import beam_search
from nmt_tf.decoding import decode
from nmt_tf.decoding import greedy_search
from nmt_tf.decoding import utils
from nmt_tf.special_tokens import BOS_ID, EOS_ID, PAD_ID


def np_log_softmax(x):
  x = x - x.max()
  return x - np.log(np.exp(x).sum())


def np_softmax(x):
  return np.exp(np_log_softmax(x))


class MarkovFake:
  """logits = table[b, time, prev]; attention = softmax(att[b, prev]); held in context."""

  def __init__(self, table, att):
    self.table = np.asarray(table, np.float32)  # [batch, max_len, vocab, vocab]
    self.att = np.asarray(att, np.float32)  # [batch, vocab, src_len]
    self.batch, self.max_len, self.vocab = self.table.shape[:3]

  def context(self):
    return {"table": tf.constant(self.table), "att": tf.constant(self.att)}

  def state(self):
    return {"steps": tf.zeros([self.batch], tf.int32)}

  @staticmethod
  def step(ids, state, context, time):
    table = tf.gather(context["table"], time, axis=1)  # [rows, vocab, vocab]
    logits = tf.gather(table, ids, batch_dims=1)  # [rows, vocab]
    attention = tf.nn.softmax(tf.gather(context["att"], ids, batch_dims=1))  # [rows, src]
    return logits, attention, {"steps": state["steps"] + 1}

  def np_step(self, b, prefix):
    prev = prefix[-1] if prefix else BOS_ID
    return self.table[b, len(prefix), prev], np_softmax(self.att[b, prev])


class HistoryFake:
  """Logits depend on the whole prefix through a state buffer written at index `time`.

  logits_t = sum_{s <= t} E[b, s, y_s] (y_0 = BOS, y_s the input of step s) and
  attention_t = softmax(sum_{s <= t} A[b, y_s]): correct only if the search reorders
  the state with the beams.
  """

  def __init__(self, emb, att):
    self.emb = np.asarray(emb, np.float32)  # [batch, max_len, vocab, vocab]
    self.att = np.asarray(att, np.float32)  # [batch, vocab, src_len]
    self.batch, self.max_len, self.vocab = self.emb.shape[:3]

  def context(self):
    return {"emb": tf.constant(self.emb), "att": tf.constant(self.att)}

  def state(self):
    return {"history": tf.zeros([self.batch, self.max_len], tf.int32),
            "att_logits": tf.zeros([self.batch, self.att.shape[-1]], tf.float32)}

  @staticmethod
  def step(ids, state, context, time):
    max_len = state["history"].shape[1]
    at_time = tf.equal(tf.range(max_len), time)[tf.newaxis]  # [1, max_len]
    history = tf.where(at_time, ids[:, tf.newaxis], state["history"])  # [rows, max_len]
    emb = tf.gather(context["emb"], history, batch_dims=2)  # [rows, max_len, vocab]
    upto = tf.cast(tf.range(max_len) <= time, tf.float32)[tf.newaxis, :, tf.newaxis]
    logits = tf.reduce_sum(emb * upto, axis=1)  # [rows, vocab]
    att_logits = state["att_logits"] + tf.gather(context["att"], ids, batch_dims=1)
    return logits, tf.nn.softmax(att_logits), {"history": history, "att_logits": att_logits}

  def np_step(self, b, prefix):
    inputs = (BOS_ID,) + tuple(prefix)
    logits = sum(self.emb[b, s, y] for s, y in enumerate(inputs))
    return logits, np_softmax(sum(self.att[b, y] for y in inputs))


def enumerate_hypotheses(fake, b, max_len, min_length=0):
  """All hypotheses allowed by the constraints: (tokens, log_prob, attention [len, src])."""
  out = []

  def extend(prefix, log_prob, atts):
    t = len(prefix)
    logits, att = fake.np_step(b, prefix)
    log_probs = np_log_softmax(logits)
    for tok in range(fake.vocab):
      if tok in (PAD_ID, BOS_ID) or (t >= max_len - 1 and tok != EOS_ID):  # never outputs
        continue
      if tok == EOS_ID and t < min_length and t < max_len - 1:
        continue
      if tok == EOS_ID:
        out.append((prefix + (tok,), log_prob + log_probs[tok], np.array(atts + [att])))
      else:
        extend(prefix + (tok,), log_prob + log_probs[tok], atts + [att])

  extend((), 0.0, [])
  return out


def np_score(log_prob, attention, alpha=0.0, beta=0.0, src_length=None):
  score = log_prob / ((5.0 + len(attention)) / 6.0) ** alpha
  coverage = np.minimum(attention.sum(0), 1.0)[:src_length]
  return score + beta * np.log(np.maximum(coverage, 1e-10)).sum()


def rescore(fake, b, tokens):
  """Reference log-probability and attention of one token sequence."""
  log_prob, atts = 0.0, []
  for t in range(len(tokens)):
    logits, att = fake.np_step(b, tuple(tokens[:t]))
    log_prob += np_log_softmax(logits)[tokens[t]]
    atts.append(att)
  return log_prob, np.array(atts)


def table_from(spec, vocab=6, max_len=6, src_len=2, batch=1, default=None):
  """A MarkovFake from {(time, prev): {token: logit}}, zeros (or `default`) elsewhere."""
  table = np.zeros([batch, max_len, vocab, vocab], np.float32)
  if default is not None:
    table[...] = default
  for (time, prev), logits in spec.items():
    for tok, value in logits.items():
      table[:, time, prev, tok] = value
  return MarkovFake(table, np.zeros([batch, vocab, src_len]))


def random_fake(cls, seed, batch=3, max_len=4, vocab=6, src_len=3, scale=2.0):
  rng = np.random.default_rng(seed)
  return cls(rng.normal(size=[batch, max_len, vocab, vocab]) * scale,
             rng.normal(size=[batch, vocab, src_len]) * scale)


def run_search(fake, beam_size=None, **kwargs):
  kwargs.setdefault("max_length", fake.max_len)
  if beam_size is None:
    return greedy_search(fake.step, fake.state(), fake.context(), fake.batch, **kwargs)
  return beam_search(fake.step, fake.state(), fake.context(), fake.batch, beam_size, **kwargs)


# Greedy prefers 4 at the first step, but the best sentence is "5 EOS".
GARDEN_PATH = {(0, BOS_ID): {4: 2.0, 5: 1.5}, (1, 4): {1: 1.2, 5: 1.0, EOS_ID: 0.5},
               (1, 5): {EOS_ID: 6.0}, (2, 1): {EOS_ID: 6.0}}


class ExactResultsTest(tf.test.TestCase):

  def assertHypothesis(self, result, b, n, tokens, fake, alpha=0.0, beta=0.0):
    """Checks ids, length, log-prob, score and attention of one returned hypothesis."""
    ids = result.ids.numpy()[b, n]
    self.assertAllEqual(ids[:len(tokens)], tokens)
    self.assertAllEqual(ids[len(tokens):], np.zeros(len(ids) - len(tokens)))
    self.assertEqual(result.lengths.numpy()[b, n], len(tokens))
    log_prob, att = rescore(fake, b, tokens)
    self.assertAllClose(result.log_probs[b, n], log_prob, atol=1e-5)
    self.assertAllClose(result.scores[b, n], np_score(log_prob, att, alpha, beta), atol=1e-5)
    self.assertAllClose(result.attention[b, n, :len(tokens)], att, atol=1e-6)
    self.assertAllEqual(result.attention[b, n, len(tokens):],
                        np.zeros([len(ids) - len(tokens), att.shape[-1]]))

  def test_greedy_exact(self):
    fake = table_from(GARDEN_PATH)
    result = run_search(fake)
    self.assertEqual(result.ids.shape, [1, 1, 6])
    self.assertEqual(result.attention.shape, [1, 1, 6, 2])
    self.assertHypothesis(result, 0, 0, [4, 1, EOS_ID], fake)

  def test_beam_exact(self):
    fake = table_from(GARDEN_PATH)
    result = run_search(fake, beam_size=2, nbest=2)
    self.assertHypothesis(result, 0, 0, [5, EOS_ID], fake)
    self.assertHypothesis(result, 0, 1, [4, 1, EOS_ID], fake)

  def test_beam_of_one_is_greedy(self):
    for seed in range(3):
      for cls in (MarkovFake, HistoryFake):
        fake = random_fake(cls, seed, max_len=6)
        greedy, beam = run_search(fake), run_search(fake, beam_size=1)
        for got, expected in zip(beam, greedy):
          self.assertAllClose(got, expected)

  def test_bfloat16_logits(self):
    fake = table_from(GARDEN_PATH)

    def step(ids, state, context, time):
      logits, attention, state = fake.step(ids, state, context, time)
      return tf.cast(logits, tf.bfloat16), tf.cast(attention, tf.bfloat16), state

    result = beam_search(step, fake.state(), fake.context(), 1, 2, 6)
    self.assertEqual(result.log_probs.dtype, tf.float32)
    self.assertAllEqual(result.ids[0, 0, :2], [5, EOS_ID])


class LengthConstraintsTest(tf.test.TestCase):

  def test_min_length(self):
    spec = {(0, BOS_ID): {EOS_ID: 5.0, 4: 3.0}, (1, 4): {EOS_ID: 5.0, 5: 3.0},
            (2, 5): {EOS_ID: 5.0}}
    fake = table_from(spec)
    self.assertAllEqual(run_search(fake).ids[0, 0, :1], [EOS_ID])
    greedy = run_search(fake, min_length=2)
    self.assertAllEqual(greedy.ids[0, 0], [4, 5, EOS_ID, 0, 0, 0])
    self.assertAllClose(greedy.log_probs[0, 0], rescore(fake, 0, [4, 5, EOS_ID])[0])
    beam = run_search(fake, beam_size=3, nbest=3, min_length=2)
    self.assertAllGreaterEqual(beam.lengths, 3)
    self.assertAllEqual(beam.ids[0, 0, :3], [4, 5, EOS_ID])

  def test_max_length_forces_eos(self):
    fake = table_from({}, batch=2, default=np.array([0, 0, 0, -5, 0, 0]))
    for beam_size in (None, 3):
      result = run_search(fake, beam_size, max_length=5)
      self.assertAllEqual(result.lengths[:, 0], [5, 5])
      self.assertAllEqual(result.ids[:, 0, 4], [EOS_ID, EOS_ID])
      self.assertNotIn(EOS_ID, result.ids[:, 0, :4].numpy())
      self.assertNotIn(PAD_ID, result.ids[:, 0, :4].numpy())
      self.assertNotIn(BOS_ID, result.ids[:, 0, :4].numpy())

  def test_per_sentence_max_length(self):
    fake = table_from({}, batch=3, default=np.array([0, 0, 0, -5, 0, 0]))
    src_length = tf.constant([1, 3, 9])
    for beam_size in (None, 3):
      result = run_search(fake, beam_size, max_length=6, src_length=src_length,
                          max_length_a=1.0, max_length_b=1.0)
      self.assertAllEqual(result.lengths[:, 0], [2, 4, 6])  # min(6, src + 1)
      ids = result.ids.numpy()[:, 0]
      self.assertAllEqual(ids[0, 1:], [EOS_ID, 0, 0, 0, 0])
      self.assertAllEqual(ids[1, 3:], [EOS_ID, 0, 0])
      self.assertEqual(ids[2, 5], EOS_ID)

  def test_early_exit(self):
    spec = {(t, prev): {EOS_ID: 10.0} for t in range(1, 10) for prev in range(6)}
    spec[(0, BOS_ID)] = {4: 2.0, 5: 1.0}
    fake = table_from(spec, max_len=10, batch=2)
    calls = []

    def step(*args):
      calls.append(1)  # eager while_loop: one python call per executed step
      return fake.step(*args)

    for beam_size in (1, 2, 4):
      del calls[:]
      result = decode(step, fake.state(), fake.context(), beam_size=beam_size,
                      nbest=beam_size, max_length=10)
      self.assertEqual(len(calls), 2)
      self.assertAllEqual(result.ids[:, 0, :2], [[4, EOS_ID], [4, EOS_ID]])


class PenaltiesRankingTest(tf.test.TestCase):

  def test_length_normalization_prefers_longer(self):
    spec = {(0, BOS_ID): {EOS_ID: 2.0, 4: 1.8}, (1, 4): {4: 8.0}, (2, 4): {EOS_ID: 8.0}}
    fake = table_from(spec)
    plain = run_search(fake, beam_size=2, nbest=2)
    self.assertAllEqual(plain.ids[0, :, :3], [[EOS_ID, 0, 0], [4, 4, EOS_ID]])
    normalized = run_search(fake, beam_size=2, nbest=2, length_penalty=1.0)
    self.assertAllEqual(normalized.ids[0, :, :3], [[4, 4, EOS_ID], [EOS_ID, 0, 0]])
    expected = [rescore(fake, 0, [4, 4, EOS_ID])[0] / (8 / 6), rescore(fake, 0, [EOS_ID])[0]]
    self.assertAllClose(normalized.scores[0], expected)
    self.assertAllClose(normalized.log_probs[0], plain.log_probs[0, ::-1])
    # "EOS" finishes first; the search must not stop while a longer hypothesis can still
    # beat it after normalization.
    best = run_search(fake, beam_size=2, length_penalty=1.0)
    self.assertAllEqual(best.ids[0, 0, :3], [4, 4, EOS_ID])

  def test_coverage_penalty_prefers_covering(self):
    spec = {(0, BOS_ID): {5: 2.0, 4: 1.7}, (1, 4): {EOS_ID: 8.0}, (1, 5): {EOS_ID: 8.0}}
    fake = table_from(spec)
    fake.att[0, BOS_ID] = fake.att[0, 5] = [3.0, -3.0]  # 5 attends the first word again
    fake.att[0, 4] = [-3.0, 3.0]  # 4 attends the second word
    plain = run_search(fake, beam_size=2, nbest=2)
    self.assertAllEqual(plain.ids[0, :, :2], [[5, EOS_ID], [4, EOS_ID]])
    covered = run_search(fake, beam_size=2, nbest=2, coverage_penalty=0.2)
    self.assertAllEqual(covered.ids[0, :, :2], [[4, EOS_ID], [5, EOS_ID]])
    for n, tokens in enumerate([[4, EOS_ID], [5, EOS_ID]]):
      log_prob, att = rescore(fake, 0, tokens)
      self.assertAllClose(covered.scores[0, n], np_score(log_prob, att, beta=0.2))
    # With a one-word source the second column is padding and must not be penalized.
    masked = run_search(fake, beam_size=2, nbest=2, coverage_penalty=0.2,
                        src_length=tf.constant([1]))
    self.assertAllEqual(masked.ids[0, :, :2], [[5, EOS_ID], [4, EOS_ID]])


class ExhaustiveSearchTest(tf.test.TestCase):
  """A beam large enough to keep every prefix finds the exact n best of the enumeration."""

  def assertMatchesEnumeration(self, fake, result, nbest, alpha=0.0, beta=0.0,
                               src_length=None, min_length=0):
    for b in range(fake.batch):
      src = None if src_length is None else src_length[b]
      hyps = [(np_score(lp, att, alpha, beta, src), toks, lp, att)
              for toks, lp, att in enumerate_hypotheses(fake, b, fake.max_len, min_length)]
      hyps.sort(key=lambda h: -h[0])
      for n, (score, tokens, log_prob, att) in enumerate(hyps[:nbest]):
        self.assertAllEqual(result.ids[b, n, :len(tokens)], tokens)
        self.assertEqual(result.lengths[b, n], len(tokens))
        self.assertAllClose(result.log_probs[b, n], log_prob, atol=1e-4)
        self.assertAllClose(result.scores[b, n], score, atol=1e-4)
        self.assertAllClose(result.attention[b, n, :len(tokens)], att, atol=1e-5)

  def test_markov_optimum(self):
    src_length = [3, 2, 1]
    for seed, (alpha, beta) in enumerate([(0.0, 0.0), (0.8, 0.0), (0.6, 0.4)]):
      fake = random_fake(MarkovFake, seed)
      result = run_search(fake, beam_size=90, nbest=5, length_penalty=alpha,
                          coverage_penalty=beta, src_length=tf.constant(src_length))
      self.assertMatchesEnumeration(fake, result, 5, alpha, beta, src_length)

  def test_history_state_optimum(self):
    fake = random_fake(HistoryFake, seed=7)
    result = run_search(fake, beam_size=90, nbest=4, length_penalty=0.5, min_length=1)
    self.assertMatchesEnumeration(fake, result, 4, alpha=0.5, min_length=1)

  def test_state_follows_its_beam(self):
    # With a small beam the search is not exact, but every returned hypothesis must carry
    # the log-probability and attention of its own token sequence, which holds only if
    # the history buffer was reordered together with the beams.
    fake = random_fake(HistoryFake, seed=3, max_len=6, vocab=7)
    result = run_search(fake, beam_size=3, nbest=3)
    for b, n in itertools.product(range(fake.batch), range(3)):
      length = result.lengths.numpy()[b, n]
      log_prob, att = rescore(fake, b, result.ids.numpy()[b, n, :length])
      self.assertAllClose(result.log_probs[b, n], log_prob, atol=1e-4)
      self.assertAllClose(result.attention[b, n, :length], att, atol=1e-5)

  def test_nbest_sorted_and_distinct(self):
    for seed in range(3):
      fake = random_fake(MarkovFake, seed, max_len=5, vocab=7, scale=1.0)
      result = run_search(fake, beam_size=6, nbest=6, length_penalty=0.6)
      scores = result.scores.numpy()
      self.assertTrue(np.all(np.isfinite(scores)))
      self.assertAllEqual(scores, -np.sort(-scores, axis=1))
      for b in range(fake.batch):
        rows = {tuple(row) for row in result.ids.numpy()[b]}
        self.assertLen(rows, 6)
        optimum = max(np_score(lp, att, 0.6) for _, lp, att in
                      enumerate_hypotheses(fake, b, fake.max_len))
        self.assertLessEqual(scores[b, 0], optimum + 1e-5)

  def test_fewer_hypotheses_than_nbest(self):
    fake = random_fake(MarkovFake, seed=1, max_len=1)
    result = run_search(fake, beam_size=3, nbest=3)
    self.assertAllEqual(result.lengths, [[1, 0, 0]] * 3)
    self.assertAllEqual(result.scores[:, 1:], np.full([3, 2], -np.inf))
    self.assertAllEqual(result.ids[:, 1:], np.zeros([3, 2, 1]))


class CompilationTest(tf.test.TestCase):

  @pytest.mark.slow  # XLA-compiles the search
  def test_jit_matches_eager(self):
    fake = random_fake(HistoryFake, seed=5, max_len=5)
    src_length = tf.constant([3, 1, 2])
    for beam_size in (1, 4):
      def search(state, context, src_length, beam_size=beam_size):
        return decode(fake.step, state, context, beam_size=beam_size, nbest=beam_size,
                      max_length=5, src_length=src_length, max_length_a=1.0,
                      max_length_b=2.0, min_length=1, length_penalty=0.6,
                      coverage_penalty=0.2)

      # Plain tf.function is covered by test_no_retrace_for_new_batch_size; eager is cheaper.
      eager = search(fake.state(), fake.context(), src_length)
      # The searches need no autograph (python control flow only on python values).
      jitted = tf.function(search, jit_compile=True, autograph=False)(
          fake.state(), fake.context(), src_length)
      for got, expected in zip(jitted, eager):
        self.assertAllClose(got, expected, atol=1e-5)

  @pytest.mark.slow  # traces the search for two batch sizes
  def test_no_retrace_for_new_batch_size(self):
    traces = []
    spec = [tf.TensorSpec([None, 4, 6, 6], tf.float32),
            tf.TensorSpec([None, 6, 3], tf.float32), tf.TensorSpec([None], tf.int32)]

    @tf.function(input_signature=spec)
    def translate(table, att, src_length):
      traces.append(1)
      state = {"steps": tf.zeros_like(src_length)}
      return decode(MarkovFake.step, state, {"table": table, "att": att}, beam_size=3,
                    nbest=2, max_length=4, src_length=src_length, max_length_a=1.0,
                    batch_size=tf.shape(table)[0])

    for batch in (2, 3, 1):
      fake = random_fake(MarkovFake, seed=batch, batch=batch)
      src_length = tf.constant([3] * batch)
      result = translate(fake.table, fake.att, src_length)
      self.assertEqual(result.ids.shape, [batch, 2, 4])
      expected = run_search(fake, beam_size=3, nbest=2, src_length=src_length,
                            max_length_a=1.0)
      self.assertAllClose(result.scores, expected.scores)
    self.assertLen(traces, 1)

  @pytest.mark.slow  # traces the search for each batch shape
  def test_batch_size_tensor_of_a_static_batch(self):
    # A tf.function traced for one batch shape, the batch size given as tf.shape(x)[0] (as
    # the Translator does): the loop body cannot see that size, and the searches must still
    # keep their loop variables' static shapes.
    fake = random_fake(HistoryFake, seed=3, max_len=5)
    for beam_size in (1, 3):
      @tf.function
      def search(state, context, beam_size=beam_size):
        return decode(fake.step, state, context, beam_size=beam_size, nbest=1, max_length=5,
                      batch_size=tf.shape(context["emb"])[0])

      expected = run_search(fake, beam_size=None if beam_size == 1 else beam_size)
      result = search(fake.state(), fake.context())
      self.assertAllEqual(result.ids, expected.ids[:, :1])
      self.assertAllClose(result.scores, expected.scores[:, :1])

  def test_batch_rows_are_independent(self):
    fake = random_fake(MarkovFake, seed=11, batch=3, max_len=5)
    batched = run_search(fake, beam_size=3, nbest=2, length_penalty=0.6)
    for b in range(3):
      alone = MarkovFake(fake.table[b:b + 1], fake.att[b:b + 1])
      single = run_search(alone, beam_size=3, nbest=2, length_penalty=0.6)
      for got, expected in zip(single, batched):
        self.assertAllClose(got[0], expected[b])


def _recording_rows(step_fn, rows):
  """step_fn, appending the rows of every step to `rows` as it runs (a py_function, so that
  it records each run of a traced step too)."""

  def step(ids, state, context, time):
    tf.py_function(lambda n: rows.append(int(n)), [tf.shape(ids)[0]], [])
    return step_fn(ids, state, context, time)

  return step


class CompactBatchTest(tf.test.TestCase):
  """compact=True drops finished sentences from the steps' batch without changing a result."""

  def search(self, fake, compact, beam_size=1, graph=False):
    src_length = tf.constant(([1, 4, 2, 6, 3, 5, 6, 1, 2] * fake.batch)[:fake.batch])

    def run(state, context):
      return decode(fake.step, state, context, max_length=fake.max_len, batch_size=fake.batch,
                    beam_size=beam_size, nbest=min(beam_size, 2), src_length=src_length,
                    max_length_a=1.0, max_length_b=1.0, length_penalty=0.6,
                    coverage_penalty=0.2 if beam_size > 1 else 0.0, compact=compact)

    run = tf.function(run, autograph=False) if graph else run
    return run(fake.state(), fake.context())

  @pytest.mark.slow  # traces the compacting search; the quick tier runs it eagerly
  def test_same_result_eager_and_in_a_graph(self):
    for beam_size in (1, 3):
      for seed, cls in ((0, MarkovFake), (1, HistoryFake), (2, HistoryFake)):
        fake = random_fake(cls, seed, batch=9, max_len=7, scale=1.0)
        expected = self.search(fake, False, beam_size)
        self.assertGreater(len(set(expected.lengths.numpy()[:, 0])), 2)  # unequal lengths
        for graph in (False, True):
          got = self.search(fake, True, beam_size, graph)
          for a, b in zip(got, expected):
            self.assertAllClose(a, b, atol=1e-6)

  def test_finished_sentences_leave_the_batch(self):
    for beam_size in (1, 3):
      fake = random_fake(HistoryFake, seed=1, batch=9, max_len=7, scale=1.0)
      rows = []
      fake.step = _recording_rows(fake.step, rows)
      result = self.search(fake, True, beam_size)
      # A sentence is decoded up to its longest returned hypothesis at least.
      ends = result.lengths.numpy().max(axis=1)  # [batch]
      self.assertEqual(rows[0], 9 * beam_size)
      self.assertEqual(rows, sorted(rows, reverse=True))
      self.assertLess(sum(rows), 9 * beam_size * len(rows))
      for time, n in enumerate(rows):  # every unfinished sentence is still in the batch
        self.assertGreaterEqual(n, int(np.sum(ends > time)) * beam_size)

  @pytest.mark.slow  # traces the search for two batch sizes
  def test_no_retrace_for_new_batch_size(self):
    traces = []
    spec = [tf.TensorSpec([None, 6, 6, 6], tf.float32), tf.TensorSpec([None, 6, 3], tf.float32)]

    @tf.function(input_signature=spec, autograph=False)
    def translate(emb, att):
      traces.append(1)
      batch = tf.shape(emb)[0]
      state = {"history": tf.zeros([batch, 6], tf.int32), "att_logits": tf.zeros([batch, 3])}
      context = {"emb": emb, "att": att}
      return [decode(HistoryFake.step, state, context, max_length=6, batch_size=batch,
                     beam_size=beam_size, compact=True) for beam_size in (1, 3)]

    for batch in (5, 2):
      fake = random_fake(HistoryFake, seed=batch, batch=batch, max_len=6, scale=1.0)
      results = translate(fake.emb, fake.att)
      for result, beam_size in zip(results, (None, 3)):
        expected = run_search(fake, beam_size)
        for got, want in zip(result, expected):
          self.assertAllClose(got, want[:, :1], atol=1e-6)
    self.assertLen(traces, 1)


class TopKTest(tf.test.TestCase):
  """utils.top_k, the chunked top-k of beam search, against tf.math.top_k."""

  def assert_same_as_top_k(self, values, k):
    expected = tf.math.top_k(values, k=k)
    unknown_rows = tf.function(lambda x: utils.top_k(x, k), input_signature=[
        tf.TensorSpec([None, values.shape[1]], tf.float32)])
    for got in (utils.top_k(values, k),
                tf.function(lambda x: utils.top_k(x, k), jit_compile=True)(values),
                unknown_rows(values)):
      self.assertAllEqual(got[0], expected.values)
      self.assertAllEqual(got[1], expected.indices)

  def test_values_and_indices_ties_and_infinities(self):
    rng = np.random.default_rng(0)
    for n, k in ((8000 * 5, 10), (6000, 8), (4099, 6), (300, 10), (1000, 3)):
      values = rng.normal(size=[7, n]).astype(np.float32)
      self.assert_same_as_top_k(tf.constant(values), k)
      # Ties: few distinct values; and rows of mostly -inf (forbidden tokens, dead beams).
      self.assert_same_as_top_k(tf.constant(np.round(values)), k)
      values[:, rng.random(n) < 0.999] = -np.inf
      values[0] = -np.inf
      self.assert_same_as_top_k(tf.constant(values), k)

  def test_chunks(self):
    self.assertEqual(utils._chunk_size(40000, 10), 125)  # pylint: disable=protected-access
    self.assertEqual(utils._chunk_size(6000, 8), 125)  # pylint: disable=protected-access
    self.assertIsNone(utils._chunk_size(300, 10))  # pylint: disable=protected-access
    self.assertIsNone(utils._chunk_size(4099, 6))  # a prime: tf.math.top_k itself

  def test_beam_search_with_a_large_vocabulary_is_unchanged(self):
    rng = np.random.default_rng(1)
    vocab = 1500
    emb = tf.constant(rng.normal(size=[vocab, 8]).astype(np.float32))
    out = tf.constant(np.round(rng.normal(size=[8, vocab]) * 4).astype(np.float32))

    def step(ids, state, context, time):
      del time
      logits = tf.gather(emb, ids) @ out + context["bias"]  # [rows, vocab], with ties
      return logits, tf.ones([tf.shape(ids)[0], 3]) / 3.0, state

    context = {"bias": tf.constant(rng.normal(size=[4, vocab]).astype(np.float32))}
    state = {"unused": tf.zeros([4])}
    search = lambda: beam_search(step, state, context, 4, 4, 12, nbest=4,
                                 length_penalty=0.6)  # pylint: disable=unnecessary-lambda-assignment
    got = search()
    with mock.patch.object(utils, "top_k", lambda values, k: tf.math.top_k(values, k=k)):
      expected = search()
    for a, b in zip(got, expected):
      self.assertAllEqual(a, b)


class ArgumentsTest(tf.test.TestCase):

  def test_bad_arguments(self):
    fake = table_from(GARDEN_PATH)
    cases = [(dict(beam_size=0), "beam_size=0"), (dict(beam_size=2, nbest=3), "nbest=3"),
             (dict(max_length=0), "max_length=0"), (dict(min_length=6), "min_length=6"),
             (dict(max_length_a=1.0), "src_length=None"),
             (dict(length_penalty=-1.0), "length_penalty=-1.0"),
             (dict(coverage_penalty=-0.5), "coverage_penalty=-0.5"),
             (dict(max_length_b=2.0), "max_length_b=2.0")]
    for kwargs, message in cases:
      kwargs.setdefault("max_length", 6)
      with self.assertRaisesRegex(ValueError, message):
        decode(fake.step, fake.state(), fake.context(), **kwargs)
