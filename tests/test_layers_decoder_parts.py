"""ConditionalGRUCell, SelfAttentiveResidual (avg/cavg), StateMemory, DeepOutput, Bridge and
OutputProjection against docs/EQUATIONS.md ("cgru", "Self-attentive residual decoder", "Output
layer", "Initial state"): numeric references, causality, step == teacher-forced call, shapes,
config round trip, bad arguments."""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from nmt_tf.layers import (BahdanauAttention, Bridge, ConditionalGRUCell, DeepOutput,
                           LuongAttention, SelfAttentiveResidual, StateAttention, StateMemory,
                           scan_time)
from nmt_tf.layers.deep_output import OutputProjection
from nmt_tf.layers.lexical import LexicalModel
from tests import numpy_reference as ref

BATCH, SRC, MEM, EMB, UNITS, TGT, VOCAB = 3, 5, 6, 5, 4, 6, 11
LENGTHS = np.array([5, 3, 1])


def randomize(layer, seed=0, scale=0.6):
  rng = np.random.RandomState(seed)
  layer.set_weights([rng.normal(0.0, scale, w.shape).astype(np.float32)
                     for w in layer.get_weights()])


def normal(shape, seed):
  return np.random.RandomState(seed).normal(size=shape).astype(np.float32)


def source(seed=1, src=SRC, lengths=LENGTHS):
  mask = np.arange(src)[None, :] < lengths[:, None]
  return normal((BATCH, src, MEM), seed) * mask[:, :, None], mask


def additive_weights(att):
  return (att.query_dense.kernel.numpy(), att.key_dense.kernel.numpy(),
          att.key_dense.bias.numpy(), att.v.numpy())


class ConditionalGRUCellTest(tf.test.TestCase, parameterized.TestCase):

  def build(self, attention=None, seed=0):
    cell = ConditionalGRUCell(UNITS, attention=attention)
    memory, mask = source()
    self.run_step(cell, normal((BATCH, EMB), 2), np.zeros((BATCH, UNITS), np.float32),
                  memory, mask)
    randomize(cell, seed)
    return cell

  def run_step(self, cell, y_emb, s_prev, memory, mask, training=False):
    memory = tf.constant(memory)
    keys = cell.attention.precompute_keys(memory)
    return cell.step(cell.project_inputs(tf.constant(y_emb)), tf.constant(s_prev), memory, keys,
                     tf.constant(mask), training=training)

  def test_step_matches_equations(self):
    cell = self.build()
    memory, mask = source(3)
    y_emb, s_prev = normal((BATCH, EMB), 4), np.tanh(normal((BATCH, UNITS), 5))
    s, context, alpha, log_prob = self.run_step(cell, y_emb, s_prev, memory, mask)
    exp_s, exp_c, exp_alpha = ref.cgru_step(
        y_emb, s_prev, memory, mask, ref.gru_weights(cell.gru1),
        additive_weights(cell.attention), ref.gru_weights(cell.gru2))
    self.assertAllClose(alpha, exp_alpha, atol=1e-5)
    self.assertAllClose(context, exp_c, atol=1e-5)
    self.assertAllClose(s, exp_s, atol=1e-5)
    self.assertAllEqual(log_prob, np.zeros(BATCH))
    self.assertEqual(s.shape, (BATCH, UNITS))
    self.assertEqual(context.shape, (BATCH, MEM))
    self.assertEqual(alpha.shape, (BATCH, SRC))

  def test_deep_transition_adds_grus_without_input(self):
    cell = ConditionalGRUCell(UNITS, transition_depth=4)
    memory, mask = source(3)
    y_emb, s_prev = normal((BATCH, EMB), 4), np.tanh(normal((BATCH, UNITS), 5))
    self.run_step(cell, y_emb, s_prev, memory, mask)
    randomize(cell, 1)
    self.assertEqual([c.name for c in cell.deep_cells], ["gru3", "gru4"])
    self.assertFalse(hasattr(cell.gru3, "kernel"))  # no input: x = b_k
    s, context, _, _ = self.run_step(cell, y_emb, s_prev, memory, mask)
    exp_s, exp_c, _ = ref.cgru_step(
        y_emb, s_prev, memory, mask, ref.gru_weights(cell.gru1),
        additive_weights(cell.attention), ref.gru_weights(cell.gru2))
    for deep in cell.deep_cells:  # s <- GRU_k(b_k, s), the input x of width 0
      exp_s = ref.gru_step(np.zeros((BATCH, 0), np.float32), exp_s,
                           np.zeros((0, 3 * UNITS), np.float32), deep.recurrent_kernel.numpy(),
                           deep.bias.numpy(), deep.recurrent_bias.numpy())
    self.assertAllClose(context, exp_c, atol=1e-5)
    self.assertAllClose(s, exp_s, atol=1e-5)
    restored = ConditionalGRUCell.from_config(cell.get_config())
    self.assertEqual(restored.transition_depth, 4)
    with self.assertRaisesRegex(ValueError, "transition_depth=1"):
      ConditionalGRUCell(UNITS, transition_depth=1)

  def test_both_grus_are_reset_after(self):
    cell = self.build()
    self.assertTrue(cell.gru1.reset_after)
    self.assertTrue(cell.gru2.reset_after)
    self.assertEqual(cell.gru2.kernel.shape, (MEM, 3 * UNITS))  # GRU2 reads c_j only
    self.assertEqual(cell.gru1.kernel.shape, (EMB, 3 * UNITS))  # GRU1 reads E y_{j-1} only

  def test_teacher_forced_sequence_matches_reference(self):
    cell = self.build()
    memory, mask = source(6)
    emb = normal((BATCH, TGT, EMB), 7)
    proj = cell.project_inputs(tf.constant(emb))  # [batch, tgt, 3*units], once per sentence
    self.assertEqual(proj.shape, (BATCH, TGT, 3 * UNITS))
    keys = cell.attention.precompute_keys(tf.constant(memory))

    def step(x_t, s, t):
      s, c, _, _ = cell.step(x_t, s, tf.constant(memory), keys, tf.constant(mask))
      return (s, c), s

    (states, contexts), _ = scan_time(step, proj, tf.zeros([BATCH, UNITS]))
    s = np.zeros((BATCH, UNITS))
    for t in range(TGT):
      s, c, _ = ref.cgru_step(emb[:, t], s, memory, mask, ref.gru_weights(cell.gru1),
                              additive_weights(cell.attention), ref.gru_weights(cell.gru2))
      self.assertAllClose(states[:, t], s, atol=1e-5)
      self.assertAllClose(contexts[:, t], c, atol=1e-5)

  def test_source_padding_invariance(self):
    cell = self.build()
    memory, mask = source(8)
    y_emb, s_prev = normal((BATCH, EMB), 9), normal((BATCH, UNITS), 10)
    s, c, alpha, _ = self.run_step(cell, y_emb, s_prev, memory, mask)
    wide = np.concatenate([memory, np.full((BATCH, 2, MEM), 9.0, np.float32)], 1)
    wide_mask = np.concatenate([mask, np.zeros((BATCH, 2), bool)], 1)
    s2, c2, alpha2, _ = self.run_step(cell, y_emb, s_prev, wide, wide_mask)
    self.assertAllClose(s2, s, atol=1e-6)
    self.assertAllClose(c2, c, atol=1e-6)
    self.assertAllEqual(alpha2[:, SRC:], np.zeros((BATCH, 2)))

  def test_hard_attention_log_prob_passes_through(self):
    cell = self.build(BahdanauAttention(UNITS, mode="hard", name="attention"))
    memory, mask = source(11)
    _, context, alpha, log_prob = self.run_step(
        cell, normal((BATCH, EMB), 12), normal((BATCH, UNITS), 13), memory, mask, training=True)
    for b in range(BATCH):
      index = int(np.argmin(np.abs(memory[b] - context[b].numpy()).max(-1)))
      self.assertAllClose(context[b], memory[b, index], atol=0)
      self.assertAllClose(log_prob[b], np.log(alpha[b, index]), atol=1e-5)

  @parameterized.named_parameters(
      ("default", None),
      ("luong_general", LuongAttention("general", units=UNITS, mode="hard", name="attention")))
  def test_config_round_trip(self, attention):
    cell = self.build(attention)
    config = cell.get_config()
    clone = ConditionalGRUCell.from_config(config)
    self.assertEqual(clone.get_config(), config)
    self.assertIsInstance(clone.attention, type(cell.attention))
    memory, mask = source()
    args = (normal((BATCH, EMB), 2), normal((BATCH, UNITS), 3), memory, mask)
    self.run_step(clone, *args)
    clone.set_weights(cell.get_weights())
    for got, want in zip(self.run_step(clone, *args), self.run_step(cell, *args)):
      self.assertAllClose(got, want)

  def test_keras_call_with_memory_from_outside(self):
    """`cell(inputs, [s], memory, mask=...)`: the step with the keys computed at the call,
    the cell protocol's (output, new_states) with the output (s, c, alpha); built from the
    shapes of a functional model's inputs."""
    cell = self.build()
    memory, mask = source(3)
    y_emb, s_prev = normal((BATCH, EMB), 4), np.tanh(normal((BATCH, UNITS), 5))
    s, context, alpha, _ = self.run_step(cell, y_emb, s_prev, memory, mask)
    (got_s, got_c, got_alpha), states = cell(tf.constant(y_emb), [tf.constant(s_prev)],
                                             tf.constant(memory), mask=tf.constant(mask))
    for got, want in ((got_s, s), (got_c, context), (got_alpha, alpha), (states[0], s)):
      self.assertAllClose(got, want, atol=1e-6)
    full = np.ones_like(mask)  # no mask: every position
    self.assertAllClose(cell(tf.constant(y_emb), [tf.constant(s_prev)], tf.constant(memory))[0][2],
                        self.run_step(cell, y_emb, s_prev, memory, full)[2], atol=1e-6)
    functional = ConditionalGRUCell(UNITS, transition_depth=3)
    inputs = [keras.Input((EMB,)), keras.Input((UNITS,)), keras.Input((None, MEM))]
    functional(inputs[0], [inputs[1]], inputs[2])
    self.assertTrue(all(layer.built for layer in (functional.gru1, functional.gru2,
                                                   functional.gru3, functional.attention)))
    self.assertLen(functional.weights, len(self.build().weights) + 3)  # and GRU3's

  @parameterized.parameters(0, -3, None, 2.0)
  def test_bad_units(self, units):
    with self.assertRaisesRegex(ValueError, "units"):
      ConditionalGRUCell(units)


class SelfAttentiveResidualTest(tf.test.TestCase, parameterized.TestCase):

  def build(self, summary, seed=0, scale=0.6):
    layer = SelfAttentiveResidual(summary, units=UNITS if summary == "cavg" else None)
    layer(tf.zeros([1, 2, EMB]))
    if layer.weights:
      randomize(layer, seed, scale)
    return layer

  def reference(self, layer, emb):
    if layer.summary == "avg":
      scores = np.zeros(emb.shape[:2])
    else:
      scores = ref.cavg_scores(emb, layer.score_dense.kernel.numpy(),
                               layer.score_dense.bias.numpy(), layer.v.numpy())
    return ref.target_summary(emb, scores)

  @parameterized.parameters("avg", "cavg")
  def test_call_matches_equations(self, summary):
    layer = self.build(summary)
    emb = normal((BATCH, TGT, EMB), 1)  # rows E y_0 (BOS) .. E y_{n-1}
    d = layer(tf.constant(emb))
    self.assertEqual(d.shape, (BATCH, TGT, EMB))
    self.assertAllClose(d, self.reference(layer, emb), atol=1e-5)
    self.assertAllEqual(d[:, 0], np.zeros((BATCH, EMB)))  # d_1 = 0: no previous target word
    self.assertAllClose(d[:, 1], emb[:, 1], atol=1e-6)  # d_2 = E y_1 alone, BOS left out
    if summary == "avg":
      self.assertAllClose(d[:, 3], emb[:, 1:4].mean(1), atol=1e-6)

  @parameterized.parameters("avg", "cavg")
  def test_causal(self, summary):
    layer = self.build(summary)
    emb = normal((BATCH, TGT, EMB), 2)
    changed = emb.copy()
    changed[:, 3:] = normal((BATCH, TGT - 3, EMB), 3)
    d, d2 = layer(tf.constant(emb)), layer(tf.constant(changed))
    self.assertAllClose(d2[:, :3], d[:, :3], atol=0)
    self.assertNotAllClose(d2[:, 3:], d[:, 3:])
    bos = emb.copy()
    bos[:, 0] = normal((BATCH, EMB), 4)  # BOS is no target word: it changes nothing
    self.assertAllClose(layer(tf.constant(bos)), d, atol=0)

  @parameterized.named_parameters(("avg", "avg", 0.6), ("cavg", "cavg", 0.6),
                                  ("cavg_large_scores", "cavg", 40.0))
  def test_step_equals_call(self, summary, scale):
    layer = self.build(summary, scale=scale)
    emb = tf.constant(normal((BATCH, TGT, EMB), 4))
    teacher = layer(emb)
    state = layer.initial_state(BATCH, EMB)
    scores = layer.scores(emb)  # [batch, tgt]
    self.assertEqual(scores.shape, (BATCH, TGT))
    self.assertAllClose(layer(emb, scores=scores), teacher, atol=0)
    state_pre = state
    for t in range(TGT):
      d, state = layer.step(emb[:, t], state, t)
      d_pre, state_pre = layer.step(emb[:, t], state_pre, tf.constant(t), score=scores[:, t])
      self.assertEqual(d.shape, (BATCH, EMB))
      self.assertAllClose(d, teacher[:, t], atol=1e-5)
      self.assertAllClose(d_pre, d, atol=1e-6)

  @parameterized.parameters("avg", "cavg")
  def test_passed_scores_are_used(self, summary):
    # Scores unrelated to the layer's own: call and step must weight by them (equations with
    # arbitrary e_i), not recompute their own.
    layer = self.build(summary)
    emb = normal((BATCH, TGT, EMB), 6)
    scores = 3.0 * normal((BATCH, TGT), 7)
    expected = ref.target_summary(emb, scores)
    self.assertNotAllClose(expected, self.reference(layer, emb))
    self.assertAllClose(layer(tf.constant(emb), scores=tf.constant(scores, tf.float32)),
                        expected, atol=1e-5)
    state = layer.initial_state(BATCH, EMB)
    for t in range(TGT):
      d, state = layer.step(tf.constant(emb[:, t]), state, t,
                            score=tf.constant(scores[:, t], tf.float32))
      self.assertAllClose(d, expected[:, t], atol=1e-5)

  def test_step_inside_tf_function(self):
    layer = self.build("cavg")
    emb = tf.constant(normal((BATCH, TGT, EMB), 5))

    @tf.function
    def run(emb):
      return scan_time(lambda e, s, t: layer.step(e, s, t), emb,
                       layer.initial_state(BATCH, EMB))[0]

    self.assertAllClose(run(emb), layer(emb), atol=1e-5)

  def test_avg_has_no_weights(self):
    self.assertEmpty(self.build("avg").weights)

  @parameterized.parameters("avg", "cavg")
  def test_config_round_trip(self, summary):
    layer = self.build(summary)
    config = layer.get_config()
    clone = SelfAttentiveResidual.from_config(config)
    self.assertEqual(clone.get_config(), config)
    emb = tf.constant(normal((BATCH, TGT, EMB), 6))
    clone(emb)
    clone.set_weights(layer.get_weights())
    self.assertAllClose(clone(emb), layer(emb))

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r"summary='max'.*\('avg', 'cavg'\)"):
      SelfAttentiveResidual("max")
    with self.assertRaisesRegex(ValueError, r"units=None with summary='cavg'"):
      SelfAttentiveResidual("cavg")
    with self.assertRaisesRegex(ValueError, r"units=0"):
      SelfAttentiveResidual("cavg", units=0)


class StateMemoryTest(tf.test.TestCase):

  MAX_LEN = 5

  def build(self, seed=0):
    layer = StateMemory(UNITS)
    s0 = tf.zeros([BATCH, UNITS])
    layer(s0, layer.initial_state(s0, self.MAX_LEN), tf.constant(0))
    randomize(layer, seed)
    return layer

  def reference(self, layer, states, s_prev, time):
    return ref.state_memory(states, s_prev, time, layer.key_dense.kernel.numpy(),
                            layer.key_dense.bias.numpy(), layer.query_dense.kernel.numpy(),
                            layer.v.numpy())

  def test_buffers_and_write(self):
    layer = self.build()
    states = normal((BATCH, self.MAX_LEN + 1, UNITS), 1)
    memory = layer.initial_state(tf.constant(states[:, 0]), self.MAX_LEN)
    self.assertEqual(memory["states"].shape, (BATCH, self.MAX_LEN + 1, UNITS))
    self.assertEqual(memory["keys"].shape, (BATCH, self.MAX_LEN + 1, UNITS))
    memory = layer.write(memory, tf.constant(states[:, 1]), 1)
    self.assertAllClose(memory["states"][:, :2], states[:, :2], atol=0)
    self.assertAllEqual(memory["states"][:, 2:], np.zeros((BATCH, self.MAX_LEN - 1, UNITS)))
    keys = states[:, :2] @ layer.key_dense.kernel.numpy() + layer.key_dense.bias.numpy()
    self.assertAllClose(memory["keys"][:, :2], keys, atol=1e-5)  # W_m s_i computed on write

  def test_each_time_sees_only_written_entries(self):
    layer = self.build()
    states = np.tanh(normal((BATCH, self.MAX_LEN + 1, UNITS), 2))
    memory = layer.initial_state(tf.constant(states[:, 0]), self.MAX_LEN)
    for time in range(self.MAX_LEN):
      s_prev = states[:, time]
      summary, weights = layer(tf.constant(s_prev), memory, tf.constant(time))
      exp_summary, exp_a = self.reference(layer, states, s_prev, time)
      self.assertEqual(weights.shape, (BATCH, self.MAX_LEN + 1))
      self.assertAllClose(weights[:, :time + 1], exp_a, atol=1e-5)
      self.assertAllEqual(weights[:, time + 1:], np.zeros((BATCH, self.MAX_LEN - time)))
      self.assertAllClose(summary, exp_summary, atol=1e-5)
      # Entries written later (here: garbage ahead of time) must not be seen now.
      ahead = layer.write(memory, tf.constant(100.0 * states[:, time + 1]), time + 1)
      summary_ahead, _ = layer(tf.constant(s_prev), ahead, tf.constant(time))
      self.assertAllClose(summary_ahead, summary, atol=1e-6)
      memory = layer.write(memory, tf.constant(states[:, time + 1]), time + 1)

  def test_time_zero_returns_s0(self):
    layer = self.build()
    s0 = normal((BATCH, UNITS), 3)
    summary, weights = layer(tf.constant(s0), layer.initial_state(tf.constant(s0), 3),
                             tf.constant(0))
    self.assertAllClose(summary, s0, atol=1e-6)
    self.assertAllClose(weights[:, 0], np.ones(BATCH))

  def test_in_tf_function_with_tensor_time(self):
    layer = self.build()
    states = normal((BATCH, self.MAX_LEN + 1, UNITS), 4)

    @tf.function
    def run(states, time):
      memory = layer.initial_state(states[:, 0], self.MAX_LEN)
      memory = layer.write(memory, states[:, 1], tf.constant(1))
      memory = layer.write(memory, states[:, 2], tf.constant(2))
      return layer(states[:, 2], memory, time)[0]

    got = run(tf.constant(states), tf.constant(2))
    self.assertAllClose(got, self.reference(layer, states, states[:, 2], 2)[0], atol=1e-5)

  def test_config_round_trip(self):
    layer = self.build()
    config = layer.get_config()
    clone = StateMemory.from_config(config)
    self.assertEqual(clone.get_config(), config)
    s0 = tf.constant(normal((BATCH, UNITS), 5))
    clone(s0, clone.initial_state(s0, self.MAX_LEN), tf.constant(0))
    clone.set_weights(layer.get_weights())
    memory = layer.write(layer.initial_state(s0, self.MAX_LEN), 2.0 * s0, 1)
    one = tf.constant(1)
    for got, want in zip(clone(s0, memory, one), layer(s0, memory, one)):
      self.assertAllClose(got, want)

  def test_bad_units(self):
    with self.assertRaisesRegex(ValueError, r"units=0.*positive integer"):
      StateMemory(0)


class StateAttentionTest(tf.test.TestCase):
  """s~_t of the self-attentive RNN (appendix A.3.3) against the numpy transcription."""

  def build(self, seed=0):
    layer = StateAttention(UNITS)
    layer(tf.zeros([BATCH, 2, UNITS]))
    randomize(layer, seed)
    return layer

  def reference(self, layer, states):
    return ref.state_attention(states, layer.key_dense.kernel.numpy(),
                               layer.key_dense.bias.numpy(), layer.query_dense.kernel.numpy(),
                               layer.v.numpy())

  def test_call_matches_equations(self):
    layer = self.build()
    states = np.tanh(normal((BATCH, TGT, UNITS), 1))  # s_1..s_n
    got = layer(tf.constant(states))
    self.assertEqual(got.shape, (BATCH, TGT, UNITS))
    self.assertAllEqual(got[:, 0], np.zeros((BATCH, UNITS)))  # s~_1 = 0
    self.assertAllClose(got[:, 1], states[:, 0], atol=1e-6)  # s~_2 = s_1 alone
    self.assertAllClose(got, self.reference(layer, states), atol=1e-5)

  def test_query_is_the_current_state(self):
    # Changing s_t changes s~_t (through the query) but no earlier s~.
    layer = self.build()
    states = np.tanh(normal((BATCH, TGT, UNITS), 2))
    changed = states.copy()
    changed[:, 3] = np.tanh(normal((BATCH, UNITS), 3))
    a, b = layer(tf.constant(states)), layer(tf.constant(changed))
    self.assertAllClose(a[:, :3], b[:, :3], atol=0)
    self.assertNotAllClose(a[:, 3], b[:, 3])

  def test_step_equals_call_in_graph(self):
    layer = self.build()
    states = tf.constant(np.tanh(normal((BATCH, TGT, UNITS), 4)), tf.float32)

    @tf.function
    def run(states):
      return scan_time(lambda s, m, t: layer.step(s, m, t), states,
                       layer.initial_state(states[:, 0], TGT))[0]

    self.assertAllClose(run(states), layer(states), atol=1e-5)

  def test_config_round_trip(self):
    layer = self.build()
    config = layer.get_config()
    clone = StateAttention.from_config(config)
    self.assertEqual(clone.get_config(), config)
    states = tf.constant(normal((BATCH, TGT, UNITS), 5), tf.float32)
    clone(states)
    clone.set_weights(layer.get_weights())
    self.assertAllClose(clone(states), layer(states))

  def test_bad_units(self):
    with self.assertRaisesRegex(ValueError, r"units=0.*positive integer"):
      StateAttention(0)


class DeepOutputTest(tf.test.TestCase, parameterized.TestCase):

  DIMS = {"state": UNITS, "prev_emb": EMB, "context": MEM}

  def inputs(self, lead, seed=1):
    return {name: normal(lead + (dim,), seed + i)
            for i, (name, dim) in enumerate(self.DIMS.items())}

  def build(self, dropout=0.0):
    layer = DeepOutput(list(self.DIMS), hidden_units=7, vocab_size=VOCAB, dropout=dropout)
    layer({k: tf.constant(v) for k, v in self.inputs((1,)).items()})
    randomize(layer)
    return layer

  def reference(self, layer, inputs):
    names = layer.input_names
    return ref.deep_output([inputs[n] for n in names], [layer.kernels[n].numpy() for n in names],
                           layer.bias.numpy(), layer.output_kernel.numpy(),
                           layer.output_bias.numpy())

  @parameterized.named_parameters(("step", (BATCH,)), ("sequence", (BATCH, TGT)),
                                  ("two_leading", (BATCH, 2, 3)))
  def test_matches_equation_any_leading_dims(self, lead):
    layer = self.build()
    inputs = self.inputs(lead)
    logits = layer({k: tf.constant(v) for k, v in inputs.items()})
    self.assertEqual(logits.shape, lead + (VOCAB,))
    self.assertAllClose(logits, self.reference(layer, inputs), atol=1e-5)
    self.assertEqual(layer.hidden({k: tf.constant(v) for k, v in inputs.items()}).shape,
                     lead + (7,))

  def test_kernel_shapes(self):
    layer = self.build()
    for name, dim in self.DIMS.items():
      self.assertEqual(layer.kernels[name].shape, (dim, 7))
    self.assertEqual(layer.output_kernel.shape, (7, VOCAB))

  def test_dropout_only_in_training(self):
    layer = self.build(dropout=0.5)
    inputs = {k: tf.constant(v) for k, v in self.inputs((BATCH, TGT)).items()}
    self.assertAllClose(layer(inputs, training=False), self.reference(layer, self.inputs(
        (BATCH, TGT))), atol=1e-5)
    self.assertNotAllClose(layer(inputs, training=True), layer(inputs, training=False))

  def test_missing_input(self):
    layer = DeepOutput(["state", "context"], hidden_units=7, vocab_size=VOCAB)
    with self.assertRaisesRegex(ValueError, r"missing \['context'\]"):
      layer({"state": tf.zeros([BATCH, UNITS])})

  def test_config_round_trip(self):
    layer = self.build(dropout=0.25)
    config = layer.get_config()
    clone = DeepOutput.from_config(config)
    self.assertEqual(clone.get_config(), config)
    inputs = {k: tf.constant(v) for k, v in self.inputs((BATCH,)).items()}
    clone(inputs)
    clone.set_weights(layer.get_weights())
    self.assertAllClose(clone(inputs), layer(inputs))

  def test_tied_to_the_embedding_table(self):
    # W_o = e^{-1/2} E^T (Press and Wolf 2017, scaled as T5): no W_o of its own, and the
    # gradient of the logits reaches the embedding table.
    embedding = keras.layers.Embedding(VOCAB, 7)
    embedding.build(None)
    randomize(embedding, seed=3)
    layer = DeepOutput(list(self.DIMS), hidden_units=7, vocab_size=VOCAB)
    layer.tie(embedding)
    inputs = {k: tf.constant(v) for k, v in self.inputs((BATCH, TGT)).items()}
    with tf.GradientTape() as tape:
      logits = layer(inputs)
    self.assertFalse(hasattr(layer, "output_kernel"))
    self.assertNotIn(embedding.embeddings.path, [w.path for w in layer.weights])
    hidden = layer.hidden(inputs).numpy()
    table = embedding.embeddings.numpy()
    self.assertAllClose(logits, hidden @ table.T / np.sqrt(7.0) + layer.output_bias.numpy(),
                        atol=1e-5)
    self.assertIsNotNone(tape.gradient(logits, embedding.embeddings))
    self.assertTrue(layer.get_config()["tied"])
    with self.assertRaisesRegex(ValueError, "needs tie\\(embedding\\) before it builds"):
      DeepOutput.from_config(layer.get_config())(inputs)
    with self.assertRaisesRegex(ValueError, "embedding of 11 x 5 to tie to an output layer of "
                                "11 words x 7 inputs"):
      layer.tie(keras.layers.Embedding(VOCAB, 5))

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r"input_names=\(\)"):
      DeepOutput([], 7, VOCAB)
    with self.assertRaisesRegex(ValueError, r"hidden_units=0"):
      DeepOutput(["s"], 0, VOCAB)
    with self.assertRaisesRegex(ValueError, r"vocab_size=-1"):
      DeepOutput(["s"], 7, -1)
    for rate in (1.0, -0.1):
      with self.assertRaisesRegex(ValueError, rf"dropout={rate}.*\[0, 1\)"):
        DeepOutput(["s"], 7, VOCAB, dropout=rate)


class BridgeTest(tf.test.TestCase):

  def build(self):
    layer = Bridge(UNITS)
    layer(tf.zeros([1, MEM]))
    randomize(layer)
    return layer

  def test_masked_mean_matches_equation(self):
    layer = self.build()
    memory, mask = source(2)
    s0 = layer(tf.constant(memory), tf.constant(mask))
    self.assertEqual(s0.shape, (BATCH, UNITS))
    self.assertAllClose(s0, ref.bridge(memory, mask, layer.dense.kernel.numpy(),
                                       layer.dense.bias.numpy()), atol=1e-5)

  def test_vector_input(self):
    layer = self.build()
    c = normal((BATCH, MEM), 3)
    self.assertAllClose(layer(tf.constant(c)),
                        np.tanh(c @ layer.dense.kernel.numpy() + layer.dense.bias.numpy()),
                        atol=1e-5)

  def test_padding_invariance(self):
    layer = self.build()
    memory, mask = source(4)
    garbage = np.where(mask[:, :, None], memory, 50.0).astype(np.float32)
    wide = np.concatenate([garbage, np.ones((BATCH, 2, MEM), np.float32)], 1)
    wide_mask = np.concatenate([mask, np.zeros((BATCH, 2), bool)], 1)
    self.assertAllClose(layer(tf.constant(wide), tf.constant(wide_mask)),
                        layer(tf.constant(memory), tf.constant(mask)), atol=1e-6)

  def test_config_round_trip(self):
    layer = self.build()
    config = layer.get_config()
    clone = Bridge.from_config(config)
    self.assertEqual(clone.get_config(), config)
    clone(tf.zeros([1, MEM]))
    clone.set_weights(layer.get_weights())
    c = tf.constant(normal((BATCH, MEM), 5))
    self.assertAllClose(clone(c), layer(c))

  def test_bad_units(self):
    with self.assertRaisesRegex(ValueError, r"units=0"):
      Bridge(0)


class OutputProjectionTest(tf.test.TestCase):

  def build(self, dropout=0.0):
    layer = OutputProjection(VOCAB, dropout=dropout)
    layer(tf.zeros([1, UNITS]))
    randomize(layer)
    return layer

  def test_matches_equation_with_leading_dims(self):
    layer = self.build()
    for lead in ((BATCH,), (BATCH, TGT)):
      x = normal(lead + (UNITS,), 1)
      logits = layer(tf.constant(x))
      self.assertEqual(logits.shape, lead + (VOCAB,))
      self.assertAllClose(logits, x @ layer.kernel.numpy() + layer.bias.numpy(), atol=1e-5)

  def test_dropout_only_in_training(self):
    layer = self.build(dropout=0.5)
    x = tf.constant(normal((BATCH, TGT, UNITS), 2))
    self.assertAllClose(layer(x), x.numpy() @ layer.kernel.numpy() + layer.bias.numpy(),
                        atol=1e-5)
    self.assertNotAllClose(layer(x, training=True), layer(x))

  def test_config_round_trip(self):
    layer = self.build(dropout=0.1)
    config = layer.get_config()
    clone = OutputProjection.from_config(config)
    self.assertEqual(clone.get_config(), config)
    clone(tf.zeros([1, UNITS]))
    clone.set_weights(layer.get_weights())
    x = tf.constant(normal((BATCH, UNITS), 3))
    self.assertAllClose(clone(x), layer(x))

  def test_tied_to_the_embedding_table(self):
    embedding = keras.layers.Embedding(VOCAB, UNITS)
    embedding.build(None)
    randomize(embedding, seed=4)
    layer = OutputProjection(VOCAB)
    layer.tie(embedding)
    x = normal((BATCH, TGT, UNITS), 5)
    logits = layer(tf.constant(x))
    self.assertFalse(hasattr(layer, "kernel"))
    self.assertAllClose(logits, x @ embedding.embeddings.numpy().T / np.sqrt(UNITS)
                        + layer.bias.numpy(), atol=1e-5)
    other = OutputProjection(VOCAB)
    other.tie(embedding)
    with self.assertRaisesRegex(ValueError, "inputs of 7 units for an output projection tied "
                                "to embeddings of 4"):
      other(tf.zeros([1, 7]))

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r"vocab_size=0"):
      OutputProjection(0)
    with self.assertRaisesRegex(ValueError, r"dropout=1.5"):
      OutputProjection(VOCAB, dropout=1.5)


if __name__ == "__main__":
  tf.test.main()


class LexicalModelTest(tf.test.TestCase):
  """layers/lexical.py: logits = W_l (tanh(W h) + h) + b_l, h = tanh(sum_i alpha_i f_i)."""

  def build(self):
    layer = LexicalModel(VOCAB)
    layer(tf.zeros([1, SRC]), tf.zeros([1, SRC, UNITS]))
    randomize(layer)
    return layer

  def test_matches_equation_for_one_step_and_all_steps(self):
    layer = self.build()
    f = normal((BATCH, SRC, UNITS), 1)
    alpha = np.exp(normal((BATCH, TGT, SRC), 2))
    alpha /= alpha.sum(-1, keepdims=True)
    h = np.tanh(np.einsum("bts,bse->bte", alpha, f))
    h = np.tanh(h @ layer.kernel.numpy()) + h
    expected = h @ layer.output_kernel.numpy() + layer.output_bias.numpy()
    self.assertAllClose(layer(tf.constant(alpha), tf.constant(f)), expected, atol=1e-5)
    for t in range(TGT):
      self.assertAllClose(layer(tf.constant(alpha[:, t]), tf.constant(f)), expected[:, t],
                          atol=1e-5)

  def test_config_round_trip(self):
    layer = self.build()
    config = layer.get_config()
    clone = LexicalModel.from_config(config)
    self.assertEqual(clone.get_config(), config)
    with self.assertRaisesRegex(ValueError, r"vocab_size=0"):
      LexicalModel(0)
