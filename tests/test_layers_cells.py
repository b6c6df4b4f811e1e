"""GRUCell (both reset placements), LSTMCell and scan_time against numpy references of
docs/EQUATIONS.md "GRU conventions": shapes, config round trip, bad arguments, graph mode;
the cells inside keras.layers.RNN (Keras' cell protocol), saved and loaded as `.keras`."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from nmt_tf.layers import GRUCell, LSTMCell, kernels, scan_time
from tests import numpy_reference as ref

BATCH, IN_DIM, UNITS, TIME = 3, 5, 4, 6


def randomize(layer, seed=0, scale=0.5):
  """Sets every weight (biases included) of a built layer to seeded random values."""
  rng = np.random.RandomState(seed)
  layer.set_weights([rng.normal(0.0, scale, w.shape).astype(np.float32)
                     for w in layer.get_weights()])


def inputs(seed=1, shape=(BATCH, IN_DIM)):
  return np.random.RandomState(seed).normal(size=shape).astype(np.float32)


class GRUCellTest(tf.test.TestCase, parameterized.TestCase):

  def build(self, reset_after, seed=0):
    cell = GRUCell(UNITS, reset_after=reset_after)
    cell(tf.zeros([1, IN_DIM]), tf.zeros([1, UNITS]))
    randomize(cell, seed)
    return cell

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  def test_step_matches_equations(self, reset_after):
    cell = self.build(reset_after)
    x, h = inputs(1), inputs(2, (BATCH, UNITS))
    expected = ref.gru_step(x, h, *ref.gru_weights(cell)[:4], reset_after=reset_after)
    self.assertAllClose(cell(tf.constant(x), [tf.constant(h)])[0], expected, atol=1e-5)
    self.assertAllClose(cell.step(cell.project_inputs(tf.constant(x)), tf.constant(h)), expected,
                        atol=1e-5)

  def test_recurrent_dropout_mask_reads_into_the_projection_only(self):
    cell = self.build(True)
    x, h = inputs(1), inputs(2, (BATCH, UNITS))
    m = (inputs(3, (BATCH, UNITS)) > 0).astype(np.float32) / 0.7  # kept units scaled
    expected = ref.gru_step(x, h, *ref.gru_weights(cell)[:4], drop=m)
    self.assertNotAllClose(expected, ref.gru_step(x, h, *ref.gru_weights(cell)[:4]))
    got = cell.step(cell.project_inputs(tf.constant(x)), tf.constant(h), tf.constant(m))
    self.assertAllClose(got, expected, atol=1e-5)
    with self.assertRaisesRegex(ValueError, "reset-after"):
      self.build(False).step(cell.project_inputs(tf.constant(x)), tf.constant(h), m)

  @parameterized.named_parameters(("float32", None), ("bf16_matmul", "bfloat16"))
  def test_reset_before_slices_kernel_once_per_pass(self, matmul_dtype):
    """A time loop of the reset-before cell reads U_zr and U_h sliced outside the loop: its
    body holds no more strided slices than the reset-after cell's, which uses all of U."""
    def body_slices(reset_after):
      cell = self.build(reset_after)

      @tf.function
      def run(x):
        with kernels.precision_scope(matmul_dtype):
          return scan_time(lambda x_t, h, t: (cell.step(cell.project_inputs(x_t), h),) * 2, x,
                           tf.zeros([BATCH, UNITS]))

      graph = run.get_concrete_function(tf.constant(inputs(4, (BATCH, TIME, IN_DIM)))).graph
      library = graph.as_graph_def().library.function
      bodies = [f for f in library if "body" in f.signature.name]
      self.assertNotEmpty(bodies)
      return sum(n.op == "StridedSlice" for f in bodies for n in f.node_def)

    self.assertEqual(body_slices(reset_after=False), body_slices(reset_after=True))

  def test_reset_placements_differ(self):
    # Same weights, different placement -> different h~ (guards against a no-op flag).
    after, before = self.build(True), self.build(False)
    before_weights = [w for w in after.get_weights()][:3]
    before.set_weights(before_weights)
    after.set_weights(before_weights + [np.zeros(3 * UNITS, np.float32)])
    x, h = inputs(1), inputs(2, (BATCH, UNITS))
    self.assertNotAllClose(after(x, h), before(x, h), atol=1e-4)

  def test_reset_before_ignores_recurrent_bias_slot(self):
    cell = self.build(False)
    self.assertLen(cell.get_weights(), 3)  # kernel, recurrent_kernel, bias: no recurrent_bias

  def test_update_gate_convention(self):
    # z -> 1 (huge z bias) keeps h_prev; z -> 0 gives h~ (docs/EQUATIONS.md:
    # h = z h_prev + (1-z) h~).
    cell = self.build(True)
    k, rk, b, rb = cell.get_weights()
    x, h = inputs(1), np.tanh(inputs(2, (BATCH, UNITS)))
    b_keep = b.copy()
    b_keep[:UNITS] = 50.0
    cell.set_weights([k, rk, b_keep, rb])
    self.assertAllClose(cell(x, h)[0], h, atol=1e-5)
    b_new = b.copy()
    b_new[:UNITS] = -50.0
    cell.set_weights([k, rk, b_new, rb])
    r = ref.sigmoid(x @ k[:, UNITS:2 * UNITS] + b[UNITS:2 * UNITS]
                    + h @ rk[:, UNITS:2 * UNITS] + rb[UNITS:2 * UNITS])
    h_tilde = np.tanh(x @ k[:, 2 * UNITS:] + b[2 * UNITS:]
                      + r * (h @ rk[:, 2 * UNITS:] + rb[2 * UNITS:]))
    self.assertAllClose(cell(x, h)[0], h_tilde, atol=1e-5)

  def test_project_inputs_leading_dims(self):
    cell = self.build(True)
    x = inputs(3, (BATCH, TIME, 2, IN_DIM))
    proj = cell.project_inputs(tf.constant(x))
    self.assertEqual(proj.shape, (BATCH, TIME, 2, 3 * UNITS))
    k, _, b, _ = cell.get_weights()
    self.assertAllClose(proj, x @ k + b, atol=1e-5)

  def test_shapes_and_initial_state(self):
    cell = self.build(False)
    h0 = cell.get_initial_state(BATCH)  # [h_0], as Keras' cells give it
    self.assertLen(h0, 1)
    self.assertAllEqual(h0[0], np.zeros((BATCH, UNITS)))
    h, states = cell(inputs(1), h0)
    self.assertEqual(h.shape, (BATCH, UNITS))
    self.assertAllEqual(states[0], h)
    self.assertEqual(cell.state_size, UNITS)

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  def test_config_round_trip(self, reset_after):
    cell = self.build(reset_after)
    config = cell.get_config()
    clone = GRUCell.from_config(config)
    self.assertEqual(clone.get_config(), config)
    clone(tf.zeros([1, IN_DIM]), tf.zeros([1, UNITS]))
    clone.set_weights(cell.get_weights())
    x, h = inputs(1), inputs(2, (BATCH, UNITS))
    self.assertAllClose(clone(x, h)[0], cell(x, h)[0])

  @parameterized.parameters(0, -1, 2.5, None)
  def test_bad_units(self, units):
    with self.assertRaisesRegex(ValueError, "units"):
      GRUCell(units)


class LSTMCellTest(tf.test.TestCase):

  def build(self):
    cell = LSTMCell(UNITS)
    cell(tf.zeros([1, IN_DIM]), cell.get_initial_state(1))
    return cell

  def test_forget_bias_starts_at_one(self):
    bias = self.build().bias.numpy()
    self.assertAllEqual(bias[UNITS:2 * UNITS], np.ones(UNITS))
    self.assertAllEqual(np.delete(bias, np.s_[UNITS:2 * UNITS]), np.zeros(3 * UNITS))

  def test_step_matches_equations(self):
    cell = self.build()
    randomize(cell)
    x, h, c = inputs(1), inputs(2, (BATCH, UNITS)), inputs(3, (BATCH, UNITS))
    exp_h, exp_c = ref.lstm_step(x, h, c, *cell.get_weights())
    got_h, (_, got_c) = cell(x, [h, c])
    self.assertAllClose(got_h, exp_h, atol=1e-5)
    self.assertAllClose(got_c, exp_c, atol=1e-5)
    got_h, got_c = cell.step(cell.project_inputs(tf.constant(x)),
                             (tf.constant(h), tf.constant(c)))
    self.assertAllClose(got_h, exp_h, atol=1e-5)

  def test_shapes(self):
    cell = self.build()
    self.assertEqual(cell.state_size, (UNITS, UNITS))
    h, (h_state, c) = cell(inputs(1), cell.get_initial_state(BATCH))
    self.assertAllEqual(h_state, h)
    self.assertEqual(h.shape, (BATCH, UNITS))
    self.assertEqual(c.shape, (BATCH, UNITS))
    self.assertEqual(cell.project_inputs(tf.constant(inputs(1, (BATCH, TIME, IN_DIM)))).shape,
                     (BATCH, TIME, 4 * UNITS))

  def test_config_round_trip(self):
    cell = self.build()
    randomize(cell)
    config = cell.get_config()
    clone = LSTMCell.from_config(config)
    self.assertEqual(clone.get_config(), config)
    clone(tf.zeros([1, IN_DIM]), clone.get_initial_state(1))
    clone.set_weights(cell.get_weights())
    x, state = inputs(1), [inputs(2, (BATCH, UNITS)), inputs(3, (BATCH, UNITS))]
    self.assertAllClose(clone(x, state)[1], cell(x, state)[1])

  def test_bad_units(self):
    with self.assertRaisesRegex(ValueError, r"units=0.*positive integer"):
      LSTMCell(0)


class ScanTimeTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.cell = GRUCell(UNITS)
    self.cell(tf.zeros([1, IN_DIM]), tf.zeros([1, UNITS]))
    randomize(self.cell)
    self.x = inputs(4, (BATCH, TIME, IN_DIM))

  def step(self, x_t, h, t):
    h, _ = self.cell(x_t, h)
    return h, h

  def test_matches_python_loop_and_reference(self):
    h0 = tf.zeros([BATCH, UNITS])
    outputs, final = scan_time(self.step, tf.constant(self.x), h0)
    self.assertEqual(outputs.shape, (BATCH, TIME, UNITS))
    h, loop = h0, []
    for t in range(TIME):
      h, _ = self.cell(self.x[:, t], h)
      loop.append(h)
    self.assertAllClose(outputs, tf.stack(loop, 1), atol=1e-6)
    self.assertAllClose(final, h, atol=1e-6)
    self.assertAllClose(outputs, ref.gru_run(self.x, np.zeros((BATCH, UNITS)),
                                             ref.gru_weights(self.cell)), atol=1e-5)

  def test_nested_inputs_outputs_state_and_time_index(self):
    # inputs: dict of two tensors; outputs: tuple incl. the step index; state: (h, count).
    ys = inputs(5, (BATCH, TIME, 2))

    def step(x_t, state, t):
      h, count = state
      h, _ = self.cell(x_t["x"], h)
      return (h, x_t["y"] * 2.0, tf.fill([BATCH], t)), (h, count + 1)

    (hs, ys2, ts), (h, count) = scan_time(
        step, {"x": tf.constant(self.x), "y": tf.constant(ys)},
        (tf.zeros([BATCH, UNITS]), tf.constant(0)))
    self.assertEqual(hs.shape, (BATCH, TIME, UNITS))
    self.assertAllClose(ys2, ys * 2.0)
    self.assertAllEqual(ts, np.tile(np.arange(TIME), (BATCH, 1)))
    self.assertAllEqual(count, TIME)
    self.assertAllClose(h, hs[:, -1])

  def test_length_shorter_than_inputs(self):
    # recurrence.py documents `length` as "optional scalar number of steps"; running fewer steps
    # than the time axis holds is the only use of passing it.
    outputs, final = scan_time(self.step, tf.constant(self.x), tf.zeros([BATCH, UNITS]),
                               length=3)
    self.assertEqual(outputs.shape[:2], (BATCH, 3))
    full, _ = scan_time(self.step, tf.constant(self.x), tf.zeros([BATCH, UNITS]))
    self.assertAllClose(outputs, full[:, :3], atol=1e-6)
    self.assertAllClose(final, full[:, 2], atol=1e-6)

  def test_tf_function_unknown_time(self):
    traces = []

    @tf.function(input_signature=[tf.TensorSpec([None, None, IN_DIM], tf.float32)])
    def run(x):
      traces.append(1)
      return scan_time(self.step, x, tf.zeros([tf.shape(x)[0], UNITS]))

    eager, eager_final = scan_time(self.step, tf.constant(self.x), tf.zeros([BATCH, UNITS]))
    graph, graph_final = run(tf.constant(self.x))
    self.assertAllClose(graph, eager, atol=1e-6)
    self.assertAllClose(graph_final, eager_final, atol=1e-6)
    short, _ = run(tf.constant(self.x[:2, :3]))
    self.assertEqual(short.shape, (2, 3, UNITS))
    self.assertAllClose(short, eager[:2, :3], atol=1e-6)
    self.assertLen(traces, 1)

  def test_single_step(self):
    outputs, final = scan_time(self.step, tf.constant(self.x[:, :1]), tf.zeros([BATCH, UNITS]))
    self.assertEqual(outputs.shape, (BATCH, 1, UNITS))
    self.assertAllClose(outputs[:, 0], final)


if __name__ == "__main__":
  tf.test.main()


class KerasRNNTest(tf.test.TestCase, parameterized.TestCase):
  """The cells in Keras' cell protocol: `keras.layers.RNN(cell)` in a functional model runs
  the cell's `step` over the sequence, saves to `.keras` and loads with
  `keras.saving.load_model`, in float32 and under the `mixed_bfloat16` policy."""

  def tearDown(self):
    keras.config.set_dtype_policy("float32")
    super().tearDown()

  def model(self, cell):
    sequence = keras.Input((TIME, IN_DIM))
    outputs = keras.layers.RNN(cell, return_sequences=True, return_state=True)(sequence)
    return keras.Model(sequence, outputs)

  def reference(self, cell, x):
    """The states of `cell.step` stepped over x, from zeros: [h_1 .. h_T]."""
    state = [tf.zeros([BATCH, UNITS])] * len(tf.nest.flatten(cell.state_size))
    outputs = []
    for t in range(TIME):
      x_proj = cell.project_inputs(tf.constant(x[:, t]))
      new = cell.step(x_proj, state[0] if len(state) == 1 else tuple(state))
      state = list(new) if isinstance(new, tuple) else [new]
      outputs.append(state[0])
    return tf.stack(outputs, 1)

  @parameterized.named_parameters(("gru", lambda: GRUCell(UNITS)),
                                  ("gru_reset_before", lambda: GRUCell(UNITS, reset_after=False)),
                                  ("gru_layer_norm", lambda: GRUCell(UNITS, layer_norm=True)),
                                  ("lstm", lambda: LSTMCell(UNITS)))
  def test_rnn_of_the_cell_saves_and_loads(self, make):
    keras.utils.set_random_seed(3)
    cell = make()
    model = self.model(cell)
    x = inputs(6, (BATCH, TIME, IN_DIM))
    sequence, *states = model(x)
    self.assertEqual(sequence.shape, (BATCH, TIME, UNITS))
    self.assertLen(states, len(tf.nest.flatten(cell.state_size)))
    self.assertAllClose(sequence, self.reference(cell, x), atol=1e-5)
    self.assertAllClose(states[0], sequence[:, -1], atol=1e-6)
    path = os.path.join(self.get_temp_dir(), "rnn.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    self.assertIsInstance(loaded.layers[1].cell, type(cell))
    self.assertAllEqual(loaded(x)[0], sequence)

  @parameterized.named_parameters(("gru", GRUCell), ("lstm", LSTMCell))
  def test_mixed_bfloat16(self, cell_class):
    keras.utils.set_random_seed(3)
    x = inputs(6, (BATCH, TIME, IN_DIM))
    reference = self.model(cell_class(UNITS))
    expected = reference(x)[0]
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = self.model(cell_class(UNITS))
    model.set_weights(reference.get_weights())  # float32 variables under both policies
    sequence = model(x)[0]
    self.assertEqual(sequence.dtype, tf.bfloat16)
    self.assertAllClose(tf.cast(sequence, tf.float32), expected, atol=0.05)

  @pytest.mark.slow  # trains
  def test_fit_lowers_the_loss(self):
    keras.utils.set_random_seed(3)
    sequence = keras.Input((TIME, IN_DIM))
    hidden = keras.layers.RNN(GRUCell(UNITS))(sequence)
    model = keras.Model(sequence, keras.layers.Dense(1)(hidden))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    x = inputs(6, (32, TIME, IN_DIM))
    y = x.sum(axis=(1, 2))[:, None] / 10.0
    history = model.fit(x, y, epochs=8, batch_size=8, verbose=0)
    self.assertLess(history.history["loss"][-1], history.history["loss"][0] / 2)
