"""RNNEncoder (birnn, rnn, reverse_source, stacked), EmbeddingEncoder and ConvEncoder against
docs/EQUATIONS.md "Encoders": per-sentence numpy references that only ever see a sentence's real
tokens, padding invariance, shapes, config round trip, bad arguments."""

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from nmt_tf.layers import kernels
from nmt_tf.models.encoders import ConvEncoder, EmbeddingEncoder, RNNEncoder
from tests import numpy_reference as ref

BATCH, SRC, EMB, UNITS = 3, 5, 4, 3
LENGTHS = np.array([5, 2, 3])


def randomize(layer, seed=0, scale=0.6):
  rng = np.random.RandomState(seed)
  layer.set_weights([rng.normal(0.0, scale, w.shape).astype(np.float32)
                     for w in layer.get_weights()])


def batch(seed=1, lengths=LENGTHS, src=SRC):
  """Embedded source with non-zero garbage at padded positions (a PAD embedding need not be 0)."""
  x = np.random.RandomState(seed).normal(size=(len(lengths), src, EMB)).astype(np.float32)
  mask = np.arange(src)[None, :] < np.asarray(lengths)[:, None]
  return x, mask


def encode(layer, x, mask):
  memory, summary = layer(tf.constant(x), tf.constant(mask))
  return memory.numpy(), summary.numpy()


RNN_VARIANTS = [
    ("birnn", dict(bidirectional=True)),
    ("birnn_2_layers", dict(bidirectional=True, num_layers=2)),
    ("birnn_reset_before", dict(bidirectional=True, reset_after=False)),
    ("rnn", dict(bidirectional=False)),
    ("rnn_2_layers", dict(bidirectional=False, num_layers=2)),
    ("rnn_reversed", dict(bidirectional=False, reverse_source=True)),
    ("rnn_reversed_2_layers", dict(bidirectional=False, reverse_source=True, num_layers=2)),
]
# The variant whose training path the quick tier checks (a stack of bidirectional layers); the
# whole suite checks every variant's.
TRAINING_PATH_QUICK = ("birnn_2_layers",)


_BUILT = {}


def build_rnn(**kwargs):
  """A built RNNEncoder with seeded random weights, shared by the tests that do not modify it:
  the first call of a Keras layer without `build` traces it symbolically (about a second)."""
  key = tuple(sorted(kwargs.items()))
  if key not in _BUILT:
    layer = RNNEncoder(UNITS, **kwargs)
    encode(layer, *batch())
    randomize(layer)
    _BUILT[key] = layer
  return _BUILT[key]


def reference_rnn(layer, x, mask):
  """Per sentence, real tokens only (docs/EQUATIONS.md "Encoders")."""
  directions = 2 if layer.bidirectional else 1
  weights = [ref.gru_weights(cell) for cell in layer.cells]
  memory = np.zeros((x.shape[0], x.shape[1], directions * UNITS))
  summaries = []
  for b, n in enumerate(mask.sum(1)):
    h = x[b, :n]  # [len, e]
    if layer.reverse_source:
      h = h[::-1]  # reading order
    for l in range(layer.num_layers):
      if layer.bidirectional:
        h, summary = ref.encode_sentence_birnn(h, weights[2 * l], weights[2 * l + 1])
      else:
        h = ref.gru_run(h[None], np.zeros((1, UNITS)), weights[l])[0]
        summary = h[-1]  # last real state (Cho 2014), of the reading order
    if layer.reverse_source:
      h = h[::-1]  # annotation i belongs to source token i (see test_reverse_source_order)
    memory[b, :n] = h
    summaries.append(summary)
  return memory, np.stack(summaries)


def check_training_path(test, kwargs):
  """The training path (the compiled cell, or the plain ops' autodiff) gives the inference
  values and the same gradients."""
  # While training, the GRU steps take the compiled cell (layers/kernels/cells.py); the
  # result and every gradient must equal the plain ops' and the inference values.
  layer = build_rnn(**kwargs)
  x, mask = batch(12)
  x = tf.constant(x)
  d_memory = tf.constant(np.random.RandomState(13).normal(
      size=(BATCH, SRC, layer.output_dim)).astype(np.float32))
  d_summary = tf.constant(np.random.RandomState(14).normal(
      size=(BATCH, layer.output_dim)).astype(np.float32))

  def run(training, compiled_cell=True):
    with tf.GradientTape() as tape:
      tape.watch(x)
      with kernels.precision_scope(compiled_cell=training and compiled_cell):
        memory, summary = layer(x, tf.constant(mask), training=training)
      loss = tf.reduce_sum(memory * d_memory) + tf.reduce_sum(summary * d_summary)
    return [memory, summary] + tape.gradient(loss, [x] + layer.trainable_variables)

  inference = run(False)
  training = tf.function(lambda: run(True))()
  autodiff = tf.function(lambda: run(True, compiled_cell=False))()
  for got, auto, want in zip(training, autodiff, inference):
    test.assertAllClose(got, want, atol=1e-5)
    test.assertAllClose(auto, want, atol=1e-5)


class RNNEncoderTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(*RNN_VARIANTS)
  def test_matches_reference(self, kwargs):
    layer = build_rnn(**kwargs)
    x, mask = batch(2)
    memory, summary = encode(layer, x, mask)
    exp_memory, exp_summary = reference_rnn(layer, x, mask)
    self.assertAllClose(memory, exp_memory, atol=1e-5)
    self.assertAllClose(summary, exp_summary, atol=1e-5)

  @parameterized.named_parameters(*RNN_VARIANTS)
  def test_shapes_and_zero_padding(self, kwargs):
    layer = build_rnn(**kwargs)
    x, mask = batch(3)
    memory, summary = encode(layer, x, mask)
    dim = (2 if layer.bidirectional else 1) * UNITS
    self.assertEqual(layer.output_dim, dim)
    self.assertEqual(memory.shape, (BATCH, SRC, dim))
    self.assertEqual(summary.shape, (BATCH, dim))
    self.assertAllEqual(memory[~mask], np.zeros(((~mask).sum(), dim)))
    self.assertLen(layer.cells, layer.num_layers * (2 if layer.bidirectional else 1))

  @parameterized.named_parameters(*RNN_VARIANTS)
  def test_extra_padding_invariance(self, kwargs):
    layer = build_rnn(**kwargs)
    x, mask = batch(4)
    memory, summary = encode(layer, x, mask)
    extra = np.random.RandomState(5).normal(size=(BATCH, 3, EMB)).astype(np.float32)
    wide_x = np.concatenate([x, extra], 1)
    wide_mask = np.concatenate([mask, np.zeros((BATCH, 3), bool)], 1)
    wide_memory, wide_summary = encode(layer, wide_x, wide_mask)
    self.assertAllClose(wide_memory[:, :SRC], memory, atol=1e-6)
    self.assertAllEqual(wide_memory[:, SRC:], np.zeros((BATCH, 3, layer.output_dim)))
    self.assertAllClose(wide_summary, summary, atol=1e-6)

  @parameterized.named_parameters(*RNN_VARIANTS)
  def test_sentence_alone_equals_sentence_in_batch(self, kwargs):
    layer = build_rnn(**kwargs)
    x, mask = batch(6)
    memory, summary = encode(layer, x, mask)
    for b, n in enumerate(LENGTHS):
      alone_memory, alone_summary = encode(layer, x[b:b + 1, :n], mask[b:b + 1, :n])
      self.assertAllClose(alone_memory[0], memory[b, :n], atol=1e-5)
      self.assertAllClose(alone_summary[0], summary[b], atol=1e-5)

  def test_birnn_summary_is_fwd_last_and_bwd_first(self):
    layer = build_rnn(bidirectional=True)
    x, mask = batch(7)
    memory, summary = encode(layer, x, mask)
    rows = np.arange(BATCH)
    self.assertAllClose(summary[:, :UNITS], memory[rows, LENGTHS - 1, :UNITS], atol=0)
    self.assertAllClose(summary[:, UNITS:], memory[:, 0, UNITS:], atol=0)

  def test_backward_starts_at_last_real_token(self):
    # bwd at the last real position has read exactly one token: GRU(x_last, 0).
    layer = build_rnn(bidirectional=True)
    x, mask = batch(8)
    memory, _ = encode(layer, x, mask)
    bwd = ref.gru_weights(layer.cells[1])
    for b, n in enumerate(LENGTHS):
      one = ref.gru_step(x[b:b + 1, n - 1], np.zeros((1, UNITS)), *bwd[:4], reset_after=bwd[4])
      self.assertAllClose(memory[b, n - 1, UNITS:], one[0], atol=1e-5)

  def test_reverse_source_order(self):
    # Sutskever 2014: the GRU reads x_n .. x_1. The summary is the state after x_1; the memory
    # is returned in source order: row i is the state right after reading x_i (so row 0 equals
    # the summary and the last real row is GRU(x_n, 0)).
    layer = build_rnn(bidirectional=False, reverse_source=True)
    x, mask = batch(9)
    memory, summary = encode(layer, x, mask)
    self.assertAllClose(memory[:, 0], summary, atol=0)
    w = ref.gru_weights(layer.cells[0])
    for b, n in enumerate(LENGTHS):
      reading = ref.gru_run(x[None, b, :n][:, ::-1], np.zeros((1, UNITS)), w)[0]  # [len, d]
      self.assertAllClose(memory[b, :n], reading[::-1], atol=1e-5)
      self.assertAllClose(summary[b], reading[-1], atol=1e-5)
    # Reading reversed differs from reading forward.
    forward = build_rnn(bidirectional=False)  # same seeded weights
    self.assertAllClose(forward.get_weights(), layer.get_weights())
    self.assertNotAllClose(encode(forward, x, mask)[1], summary)

  def test_config_round_trip(self):
    layer = build_rnn(bidirectional=False, num_layers=2, reverse_source=True, reset_after=False)
    config = layer.get_config()
    clone = RNNEncoder.from_config(config)
    self.assertEqual(clone.get_config(), config)
    x, mask = batch(10)
    encode(clone, x, mask)
    clone.set_weights(layer.get_weights())
    for got, want in zip(encode(clone, x, mask), encode(layer, x, mask)):
      self.assertAllClose(got, want)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r"units=0.*positive integer"):
      RNNEncoder(0)
    with self.assertRaisesRegex(ValueError, r"num_layers=0"):
      RNNEncoder(UNITS, num_layers=0)
    with self.assertRaisesRegex(ValueError, r"reverse_source=True with bidirectional=True"):
      RNNEncoder(UNITS, bidirectional=True, reverse_source=True)

  def test_tf_function_unknown_shapes(self):
    layer = build_rnn(bidirectional=True)
    x, mask = batch(11)

    @tf.function(input_signature=[tf.TensorSpec([None, None, EMB]), tf.TensorSpec([None, None],
                                                                                tf.bool)])
    def run(x, mask):
      return layer(x, mask)

    for got, want in zip(run(tf.constant(x), tf.constant(mask)), encode(layer, x, mask)):
      self.assertAllClose(got, want, atol=1e-6)

  @parameterized.named_parameters(*[v for v in RNN_VARIANTS if v[0] in TRAINING_PATH_QUICK])
  def test_training_path_same_values_and_gradients(self, kwargs):
    check_training_path(self, kwargs)


@pytest.mark.slow  # the training path of every other variant
@pytest.mark.variants
class RNNEncoderOtherVariantsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(*[v for v in RNN_VARIANTS if v[0] not in TRAINING_PATH_QUICK])
  def test_training_path_same_values_and_gradients(self, kwargs):
    check_training_path(self, kwargs)


class EmbeddingEncoderTest(tf.test.TestCase):

  def test_memory_and_summary(self):
    layer = EmbeddingEncoder()
    x, mask = batch(1)
    memory, summary = encode(layer, x, mask)
    self.assertAllClose(memory, x * mask[:, :, None], atol=0)
    self.assertAllClose(summary, ref.masked_mean(x, mask), atol=1e-6)

  def test_padding_invariance(self):
    layer = EmbeddingEncoder()
    x, mask = batch(2)
    memory, summary = encode(layer, x, mask)
    wide_x = np.concatenate([x, np.ones((BATCH, 2, EMB), np.float32)], 1)
    wide_mask = np.concatenate([mask, np.zeros((BATCH, 2), bool)], 1)
    wide_memory, wide_summary = encode(layer, wide_x, wide_mask)
    self.assertAllClose(wide_memory[:, :SRC], memory, atol=0)
    self.assertAllClose(wide_summary, summary, atol=1e-6)

  def test_config_round_trip(self):
    layer = EmbeddingEncoder(name="emb_encoder")
    config = layer.get_config()
    self.assertEqual(EmbeddingEncoder.from_config(config).get_config(), config)


def reference_conv(layer, x, mask):
  """Per sentence: h^l = tanh(conv_same(h^{l-1})) over the real tokens only, zero beyond."""
  memory = np.zeros(x.shape[:2] + (layer.filters,))
  summaries = []
  for b, n in enumerate(mask.sum(1)):
    h = x[b, :n]
    for conv in layer.convs:
      h = np.tanh(ref.conv1d_same(h, conv.kernel.numpy(), conv.bias.numpy()))
    memory[b, :n] = h
    summaries.append(h.mean(0))
  return memory, np.stack(summaries)


class ConvEncoderTest(tf.test.TestCase, parameterized.TestCase):

  def build(self, kernel_size=3, num_layers=2):
    layer = ConvEncoder(UNITS + 1, kernel_size=kernel_size, num_layers=num_layers)
    encode(layer, *batch())
    randomize(layer)
    return layer

  @parameterized.parameters((3, 2), (1, 1), (5, 3))
  def test_matches_reference(self, kernel_size, num_layers):
    layer = self.build(kernel_size, num_layers)
    x, mask = batch(2)
    memory, summary = encode(layer, x, mask)
    self.assertEqual(memory.shape, (BATCH, SRC, UNITS + 1))  # one column per word
    self.assertEqual(layer.output_dim, UNITS + 1)
    exp_memory, exp_summary = reference_conv(layer, x, mask)
    self.assertAllClose(memory, exp_memory, atol=1e-5)
    self.assertAllClose(summary, exp_summary, atol=1e-5)

  @parameterized.parameters((3, 2), (5, 3))
  def test_padding_invariance(self, kernel_size, num_layers):
    layer = self.build(kernel_size, num_layers)
    x, mask = batch(3)
    memory, summary = encode(layer, x, mask)
    wide_x = np.concatenate([x, np.full((BATCH, 3, EMB), 7.0, np.float32)], 1)
    wide_mask = np.concatenate([mask, np.zeros((BATCH, 3), bool)], 1)
    wide_memory, wide_summary = encode(layer, wide_x, wide_mask)
    self.assertAllClose(wide_memory[:, :SRC], memory, atol=1e-6)
    self.assertAllEqual(wide_memory[:, SRC:], np.zeros((BATCH, 3, UNITS + 1)))
    self.assertAllClose(wide_summary, summary, atol=1e-6)
    for b, n in enumerate(LENGTHS):
      alone_memory, alone_summary = encode(layer, x[b:b + 1, :n], mask[b:b + 1, :n])
      self.assertAllClose(alone_memory[0], memory[b, :n], atol=1e-5)
      self.assertAllClose(alone_summary[0], summary[b], atol=1e-5)

  def test_config_round_trip(self):
    layer = self.build(5, 3)
    config = layer.get_config()
    clone = ConvEncoder.from_config(config)
    self.assertEqual(clone.get_config(), config)
    x, mask = batch(4)
    encode(clone, x, mask)
    clone.set_weights(layer.get_weights())
    for got, want in zip(encode(clone, x, mask), encode(layer, x, mask)):
      self.assertAllClose(got, want)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r"kernel_size=4.*odd"):
      ConvEncoder(UNITS, kernel_size=4)
    with self.assertRaisesRegex(ValueError, r"filters=0"):
      ConvEncoder(0)
    with self.assertRaisesRegex(ValueError, r"num_layers=-1"):
      ConvEncoder(UNITS, num_layers=-1)
    with self.assertRaisesRegex(ValueError, r"kernel_size=0"):
      ConvEncoder(UNITS, kernel_size=0)


if __name__ == "__main__":
  tf.test.main()
