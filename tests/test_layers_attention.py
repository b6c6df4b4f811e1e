"""BahdanauAttention, LuongAttention (dot/general/concat), hard mode and make_attention against
docs/EQUATIONS.md "Attention scores": numeric references, masking and padding invariance, shapes,
config round trip, bad arguments; Keras' call form `layer(query, value, mask=...)` in a
functional model saved as `.keras`."""

import os

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from nmt_tf.layers import BahdanauAttention, LuongAttention, make_attention
from nmt_tf.layers import kernels
from tests import numpy_reference as ref

BATCH, SRC, MEM, QUERY, UNITS = 3, 5, 6, 4, 7
LENGTHS = np.array([5, 3, 1])


def randomize(layer, seed=0, scale=0.7):
  rng = np.random.RandomState(seed)
  layer.set_weights([rng.normal(0.0, scale, w.shape).astype(np.float32)
                     for w in layer.get_weights()])


def data(seed=1, q_dim=QUERY, src=SRC, lengths=LENGTHS):
  rng = np.random.RandomState(seed)
  query = rng.normal(size=(BATCH, q_dim)).astype(np.float32)
  memory = rng.normal(size=(BATCH, src, MEM)).astype(np.float32)
  mask = np.arange(src)[None, :] < lengths[:, None]
  return query, memory * mask[:, :, None], mask


def attend(layer, query, memory, mask, training=False):
  memory = tf.constant(memory)
  return layer(tf.constant(query), memory, layer.precompute_keys(memory), tf.constant(mask),
               training=training)


def built(layer, q_dim=QUERY, seed=0):
  query, memory, mask = data(q_dim=q_dim)
  attend(layer, query, memory, mask)
  randomize(layer, seed)
  return layer


def reference_scores(layer, query, memory):
  """Scores from the equation of the layer's type, using the layer's own weights."""
  if isinstance(layer, BahdanauAttention):
    return ref.additive_scores(query, memory, layer.query_dense.kernel.numpy(),
                               layer.key_dense.kernel.numpy(), layer.key_dense.bias.numpy(),
                               layer.v.numpy())
  if layer.score_type == "dot":
    return ref.dot_scores(query, memory)
  if layer.score_type == "general":
    return ref.general_scores(query, memory, layer.key_dense.kernel.numpy())
  # concat: W_a [q ; h] with W_a = [W_a_query ; W_a_memory] stacked along the input axis.
  w_a = np.concatenate([layer.query_dense.kernel.numpy(), layer.key_dense.kernel.numpy()], 0)
  return ref.concat_scores(query, memory, w_a, layer.key_dense.bias.numpy(), layer.v.numpy())


def all_layers(**kwargs):
  """One layer of every score, with query size QUERY (dot: query size MEM)."""
  return [
      ("additive", BahdanauAttention(UNITS, **kwargs), QUERY),
      ("dot", LuongAttention("dot", **kwargs), MEM),
      ("general", LuongAttention("general", units=QUERY, **kwargs), QUERY),
      ("concat", LuongAttention("concat", units=UNITS, **kwargs), QUERY),
  ]


SCORES = [("additive",), ("dot",), ("general",), ("concat",)]


def layer_for(score, **kwargs):
  for name, layer, q_dim in all_layers(**kwargs):
    if name == score:
      return built(layer, q_dim), q_dim
  raise KeyError(score)


class SoftAttentionTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*SCORES)
  def test_matches_equations(self, score):
    layer, q_dim = layer_for(score)
    query, memory, mask = data(2, q_dim)
    context, weights, log_prob = attend(layer, query, memory, mask)
    exp_context, exp_alpha = ref.attend(reference_scores(layer, query, memory), memory, mask)
    self.assertAllClose(weights, exp_alpha, atol=1e-5)
    self.assertAllClose(context, exp_context, atol=1e-5)
    self.assertAllEqual(log_prob, np.zeros(BATCH))

  @parameterized.parameters(*SCORES)
  def test_shapes_and_dtypes(self, score):
    layer, q_dim = layer_for(score)
    query, memory, mask = data(2, q_dim)
    context, weights, log_prob = attend(layer, query, memory, mask)
    self.assertEqual(context.shape, (BATCH, MEM))
    self.assertEqual(weights.shape, (BATCH, SRC))
    self.assertEqual(log_prob.shape, (BATCH,))
    self.assertEqual(weights.dtype, tf.float32)
    self.assertAllClose(tf.reduce_sum(weights, -1), np.ones(BATCH), atol=1e-6)

  @parameterized.parameters(*SCORES)
  def test_padded_positions_get_exactly_zero(self, score):
    layer, q_dim = layer_for(score)
    query, memory, mask = data(3, q_dim)
    # Garbage (large) values at padded positions must not matter either.
    memory = np.where(mask[:, :, None], memory, 100.0).astype(np.float32)
    context, weights, _ = attend(layer, query, memory, mask)
    self.assertAllEqual(tf.boolean_mask(weights, ~mask), np.zeros((~mask).sum()))
    clean = memory * mask[:, :, None]
    context_clean, weights_clean, _ = attend(layer, query, clean, mask)
    self.assertAllClose(weights, weights_clean, atol=1e-6)
    self.assertAllClose(context, context_clean, atol=1e-5)

  @parameterized.parameters(*SCORES)
  def test_extra_padding_columns_do_not_change_context(self, score):
    layer, q_dim = layer_for(score)
    query, memory, mask = data(4, q_dim)
    context, weights, _ = attend(layer, query, memory, mask)
    extra = 3
    padded_memory = np.concatenate([memory, np.ones((BATCH, extra, MEM), np.float32)], 1)
    padded_mask = np.concatenate([mask, np.zeros((BATCH, extra), bool)], 1)
    context2, weights2, _ = attend(layer, query, padded_memory, padded_mask)
    self.assertAllClose(context2, context, atol=1e-6)
    self.assertAllClose(weights2[:, :SRC], weights, atol=1e-6)
    self.assertAllEqual(weights2[:, SRC:], np.zeros((BATCH, extra)))

  @parameterized.parameters(*SCORES)
  def test_sentence_alone_equals_sentence_in_batch(self, score):
    layer, q_dim = layer_for(score)
    query, memory, mask = data(5, q_dim)
    context, _, _ = attend(layer, query, memory, mask)
    b, n = 1, LENGTHS[1]
    alone, _, _ = attend(layer, query[b:b + 1], memory[b:b + 1, :n], mask[b:b + 1, :n])
    self.assertAllClose(alone[0], context[b], atol=1e-5)

  def test_keys_precomputed_once_per_sentence(self):
    # score() only projects the query: same keys tensor reused for different queries.
    layer, _ = layer_for("additive")
    _, memory, mask = data(6)
    keys = layer.precompute_keys(tf.constant(memory))
    self.assertEqual(keys.shape, (BATCH, SRC, UNITS))
    self.assertAllClose(keys, memory @ layer.key_dense.kernel.numpy()
                        + layer.key_dense.bias.numpy(), atol=1e-5)
    for seed in (7, 8):
      query = data(seed)[0]
      weights = layer(query, tf.constant(memory), keys, mask)[1]
      _, exp_alpha = ref.attend(reference_scores(layer, query, memory), memory, mask)
      self.assertAllClose(weights, exp_alpha, atol=1e-5)

  def test_dot_rejects_mismatched_sizes(self):
    layer = LuongAttention("dot")
    _, memory, mask = data()
    with self.assertRaisesRegex(ValueError, r"query of size 4.*keys of size 6"):
      attend(layer, data(q_dim=4)[0], memory, mask)


class CompiledScoreTest(tf.test.TestCase, parameterized.TestCase):
  """The additive score of a training pass takes the compiled cell (layers/kernels/cells.py,
  gru_cell.cc): the values and gradients of the plain ops."""

  def test_the_layer_takes_the_kernel_of_its_forward_pass(self):
    layer, q_dim = layer_for("additive")
    query, memory, mask = data(2, q_dim)

    def ops_of(compiled_cell, training=True):
      def run():
        with kernels.precision_scope(compiled_cell=compiled_cell):  # as Seq2Seq.call enters it
          return attend(layer, query, memory, mask, training=training)
      graph = tf.function(run).get_concrete_function().graph
      return {op.type for op in graph.get_operations()}

    if kernels.compiled.library() is None:
      self.skipTest(f"the compiled cell is unavailable: {kernels.compiled.unavailable_reason()}")
    self.assertIn("NmtAdditiveScore", ops_of(True))
    self.assertNotIn("NmtAdditiveScore", ops_of(False))  # decoding and export: plain ops

  @parameterized.parameters(("additive", None), ("concat", None), ("additive", "bfloat16"))
  def test_training_equals_inference(self, score, matmul_dtype):
    layer, q_dim = layer_for(score)
    query, memory, mask = data(2, q_dim)
    with kernels.precision_scope(matmul_dtype, compiled_cell=True):
      got = attend(layer, query, memory, mask, training=True)
    with kernels.precision_scope(matmul_dtype):
      want = attend(layer, query, memory, mask, training=True)
    # Equal up to float rounding: the cell's tanh rounds differently from TensorFlow's.
    self.assertAllClose(got[0], want[0], rtol=1e-5, atol=1e-6)  # context
    self.assertAllClose(got[1], want[1], rtol=1e-5, atol=1e-6)  # weights
    self.assertAllEqual(got[2], want[2])

  @parameterized.parameters((tf.float32, 1e-5), (tf.bfloat16, 2e-2))
  def test_values_and_gradients_in_a_time_loop(self, dtype, tol):
    # bfloat16 keys (mixed_bfloat16) take the plain ops: the cell is float32 only.
    rng = np.random.RandomState(0)
    v = tf.Variable(rng.normal(size=[UNITS]).astype(np.float32))

    @tf.function(reduce_retracing=True)
    def run(keys, queries, compiled_cell):  # keys [b, n, u], queries [time, b, u]
      with tf.GradientTape() as tape, kernels.precision_scope(compiled_cell=compiled_cell):
        tape.watch([keys, queries])
        def body(t, total):
          e = kernels.additive_score(tf.cast(keys, dtype), tf.cast(queries[t], dtype), v)
          weights = tf.range(1.0, tf.cast(tf.shape(e)[1], tf.float32) + 1.0)  # [n]
          return t + 1, total + tf.reduce_sum(tf.cast(e, tf.float32) ** 2 * weights)
        _, total = tf.while_loop(lambda t, _: t < tf.shape(queries)[0], body, (0, 0.0))
      return total, tape.gradient(total, [keys, queries, v])

    for batch, src in ((3, 5), (2, 9)):
      keys = tf.constant(rng.normal(size=[batch, src, UNITS]).astype(np.float32))
      queries = tf.constant(rng.normal(size=[4, batch, UNITS]).astype(np.float32))
      plain, plain_grads = run(keys, queries, False)
      compiled, compiled_grads = run(keys, queries, True)
      self.assertAllClose(compiled, plain, rtol=tol)
      for got, want in zip(compiled_grads, plain_grads):
        self.assertAllClose(got, want, rtol=tol, atol=tol * float(tf.reduce_max(abs(want))))


class ConfigAndArgumentsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*SCORES)
  def test_config_round_trip(self, score):
    layer, q_dim = layer_for(score, mode="hard", hard_inference="argmax")
    config = layer.get_config()
    clone = type(layer).from_config(config)
    self.assertEqual(clone.get_config(), config)
    self.assertEqual((clone.mode, clone.hard_inference), ("hard", "argmax"))
    query, memory, mask = data(2, q_dim)
    attend(clone, query, memory, mask)
    clone.set_weights(layer.get_weights())
    for got, want in zip(attend(clone, query, memory, mask), attend(layer, query, memory, mask)):
      self.assertAllClose(got, want)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r"units=0.*positive integer"):
      BahdanauAttention(0)
    with self.assertRaisesRegex(ValueError, r"units=None"):
      LuongAttention("concat")
    with self.assertRaisesRegex(ValueError, r"units=-2"):
      LuongAttention("general", units=-2)
    with self.assertRaisesRegex(ValueError, r"score='bilinear'"):
      LuongAttention("bilinear", units=4)
    with self.assertRaisesRegex(ValueError, r"mode='sampled'"):
      BahdanauAttention(4, mode="sampled")
    with self.assertRaisesRegex(ValueError, r"hard_inference='mode'"):
      LuongAttention("dot", mode="hard", hard_inference="mode")

  def test_make_attention(self):
    for score in ("additive", "mlp"):
      layer = make_attention(score, UNITS, QUERY, MEM, mode="hard", hard_inference="argmax")
      self.assertIsInstance(layer, BahdanauAttention)
      self.assertEqual((layer.units, layer.mode, layer.hard_inference), (UNITS, "hard", "argmax"))
    general = make_attention("general", UNITS, QUERY, MEM)
    self.assertEqual((general.score_type, general.units), ("general", QUERY))
    concat = make_attention("concat", UNITS, QUERY, MEM)
    self.assertEqual((concat.score_type, concat.units), ("concat", UNITS))
    dot = make_attention("dot", UNITS, MEM, MEM, name="att")
    self.assertEqual((dot.score_type, dot.name), ("dot", "att"))
    # general maps h_i to the query size: the layer works with that query size.
    built(general)
    query, memory, mask = data(2)
    self.assertEqual(attend(general, query, memory, mask)[0].shape, (BATCH, MEM))
    with self.assertRaisesRegex(ValueError, r"score='dot' needs.*\(4\).*\(6\)"):
      make_attention("dot", UNITS, QUERY, MEM)
    with self.assertRaisesRegex(ValueError, r"score='location'"):
      make_attention("location", UNITS, QUERY, MEM)


class HardAttentionTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*SCORES)
  def test_training_selects_one_row(self, score):
    layer, q_dim = layer_for(score, mode="hard")
    query, memory, mask = data(2, q_dim)
    _, exp_alpha = ref.attend(reference_scores(layer, query, memory), memory, mask)
    tf.random.set_seed(0)
    for _ in range(5):
      context, weights, log_prob = attend(layer, query, memory, mask, training=True)
      self.assertAllClose(weights, exp_alpha, atol=1e-5)  # alpha itself is still soft
      for b in range(BATCH):
        dist = np.abs(memory[b] - context[b].numpy()[None]).max(-1)  # [src]
        index = int(np.argmin(dist))
        self.assertAllClose(context[b], memory[b, index], atol=0)  # exactly one row
        self.assertTrue(mask[b, index], "sampled a padded position")
        self.assertAllClose(log_prob[b], np.log(exp_alpha[b, index]), atol=1e-5)

  def test_samples_follow_alpha_and_skip_padding(self):
    layer, _ = layer_for("additive", mode="hard")
    query, _, mask = data(2)
    # One-hot memory rows identify the sampled index directly.
    memory = np.tile(np.eye(SRC, dtype=np.float32)[None], (BATCH, 1, 1))
    memory = np.concatenate([memory, np.zeros((BATCH, SRC, MEM - SRC), np.float32)], -1)
    keys = layer.precompute_keys(tf.constant(memory))
    n = 400
    q = tf.constant(np.repeat(query, n, 0))
    m = tf.constant(np.repeat(memory, n, 0))
    k = tf.repeat(keys, n, 0)
    msk = tf.constant(np.repeat(mask, n, 0))
    tf.random.set_seed(1)
    context, weights, _ = layer(q, m, k, msk, training=True)
    picked = context.numpy()[:, :SRC].reshape(BATCH, n, SRC)
    self.assertAllEqual(picked.sum(-1), np.ones((BATCH, n)))
    frequency = picked.mean(1)  # [batch, src]
    self.assertAllEqual(frequency[~mask], np.zeros((~mask).sum()))
    self.assertAllClose(frequency, weights.numpy()[::n], atol=0.1)

  def test_sampling_replays_from_the_seed_generator_state(self):
    layer, q_dim = layer_for("additive", mode="hard")
    query, memory, mask = data(2, q_dim)
    state = layer.seed_generator.state.numpy()
    first = [attend(layer, query, memory, mask, training=True)[0] for _ in range(3)]
    self.assertNotAllEqual(layer.seed_generator.state.numpy(), state)  # the stream advanced
    layer.seed_generator.state.assign(state)  # what restoring a trainer checkpoint does
    for expected in first:
      self.assertAllEqual(attend(layer, query, memory, mask, training=True)[0], expected)

  @parameterized.parameters(*SCORES)
  def test_argmax_inference(self, score):
    layer, q_dim = layer_for(score, mode="hard", hard_inference="argmax")
    query, memory, mask = data(3, q_dim)
    context, weights, log_prob = attend(layer, query, memory, mask, training=False)
    _, exp_alpha = ref.attend(reference_scores(layer, query, memory), memory, mask)
    index = exp_alpha.argmax(-1)
    self.assertAllClose(context, memory[np.arange(BATCH), index], atol=0)
    self.assertAllClose(weights, exp_alpha, atol=1e-5)
    self.assertAllEqual(log_prob, np.zeros(BATCH))

  @parameterized.parameters(*SCORES)
  def test_expectation_inference_equals_soft(self, score):
    layer, q_dim = layer_for(score, mode="hard", hard_inference="expectation")
    soft = built(type(layer).from_config({**layer.get_config(), "mode": "soft"}), q_dim)
    soft.set_weights(layer.get_weights())
    query, memory, mask = data(4, q_dim)
    for got, want in zip(attend(layer, query, memory, mask, training=False),
                         attend(soft, query, memory, mask)):
      self.assertAllClose(got, want, atol=0)

  def test_soft_mode_ignores_training(self):
    layer, _ = layer_for("additive")
    query, memory, mask = data(5)
    for got, want in zip(attend(layer, query, memory, mask, training=True),
                         attend(layer, query, memory, mask, training=False)):
      self.assertAllClose(got, want, atol=0)

  def test_log_prob_gradient_reaches_score_weights(self):
    # REINFORCE needs d log alpha_i / d theta.
    layer, _ = layer_for("additive", mode="hard")
    query, memory, mask = data(6)
    with tf.GradientTape() as tape:
      _, _, log_prob = attend(layer, query, memory, mask, training=True)
      loss = tf.reduce_sum(log_prob)
    grads = tape.gradient(loss, layer.trainable_weights)
    self.assertTrue(all(g is not None for g in grads))
    self.assertGreater(sum(float(tf.reduce_sum(tf.abs(g))) for g in grads), 0.0)


if __name__ == "__main__":
  tf.test.main()


class KerasCallTest(tf.test.TestCase, parameterized.TestCase):
  """Keras' call form, `layer(query, value, mask=...)`: the layer computes its keys and gives
  what the decoders' form (precomputed keys) gives; it builds from the input shapes in a
  functional model, which saves to `.keras` and loads; a sequence of queries attends query by
  query; a mask of another shape is one clear error."""

  def tearDown(self):
    keras.config.set_dtype_policy("float32")
    super().tearDown()

  @parameterized.named_parameters(("additive", "additive"), ("dot", "dot"),
                                  ("general", "general"), ("concat", "concat"))
  def test_keys_computed_as_precomputed(self, score):
    query_dim = MEM if score == "dot" else QUERY
    layer = built(make_attention(score, UNITS, query_dim, MEM), q_dim=query_dim)
    query, memory, mask = data(q_dim=query_dim)
    expected = attend(layer, query, memory, mask)
    got = layer(tf.constant(query), tf.constant(memory), mask=tf.constant(mask))
    for a, b in zip(got, expected):
      self.assertAllClose(a, b, atol=1e-6)
    keras_form = layer(tf.constant(query), tf.constant(memory), mask=[None, tf.constant(mask)])
    self.assertAllClose(keras_form[0], expected[0], atol=1e-6)
    everything = layer(tf.constant(query), tf.constant(memory))  # no mask: every position
    self.assertAllClose(everything[0], attend(layer, query, memory, np.ones_like(mask))[0],
                        atol=1e-6)
    # A sequence of queries [batch, t_q, q_dim]: each query alone.
    queries = np.stack([query, query[::-1]], 1)
    context, weights, log_prob = layer(tf.constant(queries), tf.constant(memory),
                                       mask=tf.constant(mask))
    self.assertEqual(context.shape, (BATCH, 2, MEM))
    self.assertEqual(weights.shape, (BATCH, 2, SRC))
    self.assertEqual(log_prob.shape, (BATCH, 2))
    self.assertAllClose(context[:, 0], expected[0], atol=1e-6)
    self.assertAllClose(context[:, 1], attend(layer, query[::-1], memory, mask)[0], atol=1e-6)

  @parameterized.named_parameters(("additive", "additive"), ("concat", "concat"),
                                  ("general", "general"), ("dot", "dot"))
  def test_functional_model_builds_saves_and_loads(self, score):
    keras.utils.set_random_seed(2)
    query_dim = MEM if score == "dot" else QUERY
    query_in, value_in = keras.Input((query_dim,)), keras.Input((None, MEM))
    mask_in = keras.Input((None,), dtype="bool")
    layer = make_attention(score, UNITS, query_dim, MEM)
    context, weights, _ = layer(query_in, value_in, mask=mask_in)
    model = keras.Model([query_in, value_in, mask_in], [context, weights])
    self.assertTrue(layer.built)
    if score != "dot":  # the projections built from the input shapes (dot has no weights)
      self.assertTrue(layer.key_dense.built)
    query, memory, mask = data(q_dim=query_dim)
    expected = model([query, memory, mask])
    self.assertAllClose(expected[0], attend(layer, query, memory, mask)[0], atol=1e-6)
    path = os.path.join(self.get_temp_dir(), "attention.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    for a, b in zip(loaded([query, memory, mask]), expected):
      self.assertAllEqual(a, b)

  def test_general_without_units_takes_the_query_size(self):
    query, memory, mask = data()
    layer = LuongAttention("general")
    context, _, _ = layer(tf.constant(query), tf.constant(memory), mask=tf.constant(mask))
    self.assertEqual(layer.key_dense.kernel.shape, (MEM, QUERY))
    self.assertEqual(context.shape, (BATCH, MEM))
    self.assertIsNone(LuongAttention.from_config(layer.get_config()).units)
    with self.assertRaisesRegex(ValueError, r"takes q_dim from the query's shape; call it with "
                                r"the query, or pass units=q_dim"):
      LuongAttention("general").precompute_keys(tf.constant(memory))

  def test_mixed_bfloat16(self):
    keras.utils.set_random_seed(2)
    query, memory, mask = data()
    reference = built(BahdanauAttention(UNITS))
    expected = attend(reference, query, memory, mask)[0]
    keras.config.set_dtype_policy("mixed_bfloat16")
    layer = BahdanauAttention(UNITS)
    layer(tf.constant(query), tf.constant(memory), mask=tf.constant(mask))
    layer.set_weights(reference.get_weights())
    context, weights, _ = layer(tf.constant(query), tf.constant(memory), mask=tf.constant(mask))
    self.assertEqual(context.dtype, tf.bfloat16)
    self.assertAllClose(tf.cast(context, tf.float32), expected, atol=0.05)
    self.assertAllClose(tf.reduce_sum(weights, -1), np.ones(BATCH), atol=1e-3)

  def test_a_mask_of_another_shape_is_one_clear_error(self):
    layer = BahdanauAttention(UNITS, name="att")
    query, memory, mask = data()
    for bad in (mask[:, :2], mask[:, :, None], mask[:2]):
      # Keras adds the call's arguments below the message, as for its own layers.
      with self.assertRaisesRegex(ValueError, r"Attention layer 'att' received a mask of "
                                  r"shape \(.*\) for a value of shape \(3, 5, 6\); the mask is "
                                  r"\[batch, src_len\]"):
        layer(tf.constant(query), tf.constant(memory), mask=tf.constant(bad))
    with self.assertRaisesRegex(ValueError, "a list of 3 masks"):
      layer(tf.constant(query), tf.constant(memory), mask=[None, None, tf.constant(mask)])
