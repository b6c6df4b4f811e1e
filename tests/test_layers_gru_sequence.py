"""kernels.gru_sequences (layers/kernels/gru_sequence.py) and TrainingLoops.gru_stack: the
hand-written BPTT of GRUs (both reset placements) against the numpy
reference of docs/EQUATIONS.md "GRU conventions" (forward) and TensorFlow's autodiff of the same
recurrence through scan_time (every gradient), eager and in graph mode, with float32 and
bfloat16 products, for one and two chains and a single step."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from nmt_tf.layers import GRUCell, kernels, scan_time
from tests import numpy_reference as ref

BATCH, IN_DIM, UNITS, TIME = 3, 5, 4, 6


def make_cell(seed, reset_after=True, layer_norm=False):
  cell = GRUCell(UNITS, reset_after=reset_after, layer_norm=layer_norm)
  cell(tf.zeros([1, IN_DIM]), tf.zeros([1, UNITS]))
  rng = np.random.RandomState(seed)
  cell.set_weights([rng.normal(0.0, 0.5, w.shape).astype(np.float32)
                    for w in cell.get_weights()])
  return cell


def data(seed, time=TIME):
  rng = np.random.RandomState(seed)
  x = rng.normal(size=(BATCH, time, IN_DIM)).astype(np.float32)
  h0 = rng.normal(0.0, 0.5, size=(BATCH, UNITS)).astype(np.float32)
  d_out = rng.normal(size=(BATCH, time, UNITS)).astype(np.float32)  # upstream gradient
  return tf.constant(x), tf.constant(h0), tf.constant(d_out)


def run_manual(cells, xs, h0s):
  """States [batch, time, units] of every cell through gru_sequences."""
  projected = [cell.project_inputs(x) for cell, x in zip(cells, xs)]  # [batch, time, 3*units]
  return kernels.gru_sequences(projected, h0s, [kernels.gru_weights(c, tf.float32) for c in cells])


def run_autodiff(cells, xs, h0s):
  """The same recurrences through scan_time and GRUCell.step (TensorFlow's gradients)."""
  projected = [cell.project_inputs(x) for cell, x in zip(cells, xs)]

  def step(x_t, states, t):
    new = [cell.step(xp, h) for cell, xp, h in zip(cells, x_t, states)]
    return new, new

  outputs, _ = scan_time(step, projected, list(h0s), defer=False)
  return outputs


def values_and_gradients(run, cells, xs, h0s, d_outs, matmul_dtype=None):
  """Outputs and the gradients of sum(outputs * d_out) w.r.t. inputs, h0 and every weight."""
  variables = [v for cell in cells for v in cell.trainable_variables]
  with tf.GradientTape() as tape:
    tape.watch(xs + h0s)
    with kernels.precision_scope(matmul_dtype):
      outputs = run(cells, xs, h0s)
    loss = tf.add_n([tf.reduce_sum(o * d) for o, d in zip(outputs, d_outs)])
  grads = tape.gradient(loss, xs + h0s + variables)
  return outputs, grads


class GRUSequencesTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.cells = [make_cell(0), make_cell(1)]
    self.cells_reset_before = [make_cell(2, False), make_cell(3, False)]
    self.cells_layer_norm = [make_cell(4, layer_norm=True), make_cell(5, layer_norm=True)]

  def check(self, chains, time=TIME, matmul_dtype=None, graph=False, rtol=1e-5, atol=1e-5,
            reset_after=True, layer_norm=False):
    cells = (self.cells_layer_norm if layer_norm else
             self.cells if reset_after else self.cells_reset_before)[:chains]
    batches = [data(10 + i, time) for i in range(chains)]
    xs, h0s, d_outs = ([b[j] for b in batches] for j in range(3))

    def both():
      return [values_and_gradients(run, cells, xs, h0s, d_outs, matmul_dtype)
              for run in (run_manual, run_autodiff)]

    (manual, manual_grads), (auto, auto_grads) = tf.function(both)() if graph else both()
    self.assertLen(manual, chains)
    for cell, x, h0, out, expected in zip(cells, xs, h0s, manual, auto):
      self.assertEqual(out.shape, (BATCH, time, UNITS))
      self.assertAllClose(out, expected, rtol=rtol, atol=atol)
      if matmul_dtype is None and not layer_norm:
        self.assertAllClose(out, ref.gru_run(x.numpy(), h0.numpy(), ref.gru_weights(cell)),
                            atol=1e-5)
    self.assertLen(manual_grads, len(auto_grads))
    for got, expected in zip(manual_grads, auto_grads):
      self.assertIsNotNone(got)
      self.assertAllClose(got, expected, rtol=rtol, atol=atol)

  @parameterized.named_parameters(
      ("one_chain", 1, True), ("two_chains", 2, True),
      ("one_chain_reset_before", 1, False), ("two_chains_reset_before", 2, False))
  def test_matches_autodiff_eager(self, chains, reset_after):
    self.check(chains, reset_after=reset_after)

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  def test_matches_autodiff_in_graph(self, reset_after):
    self.check(2, graph=True, reset_after=reset_after)

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  def test_single_step(self, reset_after):
    self.check(2, time=1, reset_after=reset_after)

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  def test_bfloat16_products(self, reset_after):
    # Both paths round the products' operands to bfloat16; they differ in the order of the
    # sums (the kernel's gradient: one product over all steps instead of a sum of per-step
    # bfloat16 products), so the tolerance is bfloat16's.
    self.check(2, matmul_dtype="bfloat16", rtol=3e-2, atol=3e-2, reset_after=reset_after)

  @parameterized.named_parameters(("eager", False, None), ("graph", True, None),
                                  ("bfloat16_products", True, "bfloat16"))
  def test_layer_norm_matches_autodiff(self, graph, matmul_dtype):
    # The hand-written backward pass through the normalization (kernels/layer_norm.py) against
    # TensorFlow's gradient of GRUCell.step, gains and biases included.
    tolerance = 1e-5 if matmul_dtype is None else 3e-2
    self.check(2, graph=graph, matmul_dtype=matmul_dtype, layer_norm=True, rtol=tolerance,
               atol=tolerance)

  def test_layer_norm_step_is_the_equation(self):
    cell = self.cells_layer_norm[0]
    x, h0, _ = data(6, time=1)
    got = cell(x[:, 0], h0)
    weights = [w.numpy() for w in (cell.kernel, cell.recurrent_kernel, cell.bias,
                                   cell.recurrent_bias, cell.input_gain, cell.recurrent_gain)]
    self.assertAllClose(got, ref.ln_gru_step(x[:, 0].numpy(), h0.numpy(), *weights), atol=1e-5)
    with self.assertRaisesRegex(ValueError, "layer_norm=True with reset_after=False"):
      GRUCell(UNITS, reset_after=False, layer_norm=True)

  def test_unknown_time_in_tf_function(self):
    traces = []

    @tf.function(input_signature=[tf.TensorSpec([None, None, IN_DIM], tf.float32)])
    def states(x):
      traces.append(1)
      return run_manual(self.cells[:1], [x], [tf.zeros([tf.shape(x)[0], UNITS])])[0]

    x = data(3)[0]
    zeros = tf.zeros([BATCH, UNITS])
    self.assertAllClose(states(x), run_autodiff(self.cells[:1], [x], [zeros])[0], atol=1e-5)
    self.assertEqual(states(x[:2, :4]).shape, (2, 4, UNITS))
    self.assertLen(traces, 1)

  def test_missing_upstream_gradient(self):
    # Only the first chain's states reach the loss: the second gets no gradient at all.
    xs, h0s = [data(1)[0], data(2)[0]], [data(1)[1], data(2)[1]]
    with tf.GradientTape() as tape:
      tape.watch(xs)
      outputs = run_manual(self.cells, xs, h0s)
      loss = tf.reduce_sum(outputs[0])
    d_x0, d_x1 = tape.gradient(loss, xs)
    self.assertGreater(float(tf.reduce_sum(tf.abs(d_x0))), 0.0)
    self.assertAllEqual(d_x1, tf.zeros_like(d_x1))

  def test_training_loops_run_cells_batch_major(self):
    xs, h0s = [data(4)[0], data(5)[0]], [data(4)[1], data(5)[1]]
    loops = kernels.DEFAULT_LOOPS
    for cells in (self.cells, self.cells_reset_before):
      got = loops.gru_stack(cells, [c.project_inputs(x) for c, x in zip(cells, xs)], h0s)
      for out, want in zip(got, run_autodiff(cells, xs, h0s)):
        self.assertAllClose(out, want, atol=1e-5)
    with self.assertRaisesRegex(ValueError, "one reset placement"):
      loops.gru_stack([self.cells[0], self.cells_reset_before[0]], xs, h0s)
    autodiff = kernels.TrainingLoops(kernels.KernelOptions(gru_backward="autodiff").resolve(
        "encoder"))
    self.assertIsNone(autodiff.gru_stack(self.cells, xs, h0s))  # the part runs `step`

  def test_mismatched_lists(self):
    x, h0, u = tf.zeros([2, 1, 3 * UNITS]), tf.zeros([2, UNITS]), tf.zeros([UNITS, 3 * UNITS])
    with self.assertRaisesRegex(ValueError, "one initial state and one GRUWeights per input"):
      kernels.gru_sequences([x], [], [kernels.GRUWeights(u, tf.zeros([3 * UNITS]))])
    with self.assertRaisesRegex(ValueError, "one reset placement"):
      kernels.gru_sequences([x, x], [h0, h0], [kernels.GRUWeights(u, tf.zeros([3 * UNITS])),
                                              kernels.GRUWeights(u)])
    with self.assertRaisesRegex(ValueError, "all GRUs layer-normalized or none"):
      b, g = tf.zeros([3 * UNITS]), tf.ones([3 * UNITS])
      kernels.gru_sequences([x, x], [h0, h0], [kernels.GRUWeights(u, b, g),
                                              kernels.GRUWeights(u, b)])


if __name__ == "__main__":
  tf.test.main()
