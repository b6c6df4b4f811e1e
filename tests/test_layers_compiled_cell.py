"""The compiled GRU cell (layers/kernels/gru_cell.cc, cells.py, compiled.py): GRUs of both
reset placements run over sequences by scan_time with the compiled cell give the values of
the plain ops and of the numpy reference of docs/EQUATIONS.md "GRU conventions", and every
gradient of the plain ops (TensorFlow's autodiff of the same step), eager and in graph mode,
with float32 and bfloat16 products, layer norm and recurrent dropout; so does the additive
score; the ops refuse bad shapes; the library builds once into its cache, and without it the
steps run on plain ops."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from nmt_tf.layers import GRUCell, kernels, scan_time
from nmt_tf.layers.kernels import cells, compiled
from tests import numpy_reference as ref
from tests.model_fixtures import op_types
from tests.waits import SAFETY_NET

BATCH, IN_DIM, UNITS, TIME = 3, 5, 4, 6
LIBRARY = compiled.library()


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


def run_cells(cells_, xs, h0s, drops=None):
  """States [batch, time, units] of every cell, its `step` in scan_time."""
  projected = [cell.project_inputs(x) for cell, x in zip(cells_, xs)]  # [batch, time, 3*units]
  drops = drops or [None] * len(cells_)

  def step(x_t, states, t):
    new = [cell.step(xp, h, m) for cell, xp, h, m in zip(cells_, x_t, states, drops)]
    return new, new

  outputs, _ = scan_time(step, projected, list(h0s))
  return outputs


def values_and_gradients(cells_, xs, h0s, d_outs, compiled_cell, matmul_dtype=None,
                         drops=None):
  """Outputs and the gradients of sum(outputs * d_out) w.r.t. inputs, h0 and every weight."""
  variables = [v for cell in cells_ for v in cell.trainable_variables]
  with tf.GradientTape() as tape:
    tape.watch(xs + h0s)
    with kernels.precision_scope(matmul_dtype, compiled_cell=compiled_cell):
      outputs = run_cells(cells_, xs, h0s, drops)
    loss = tf.add_n([tf.reduce_sum(o * d) for o, d in zip(outputs, d_outs)])
  grads = tape.gradient(loss, xs + h0s + variables)
  return outputs, grads


class CompiledCellSequencesTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.cells = [make_cell(0), make_cell(1)]
    self.cells_reset_before = [make_cell(2, False), make_cell(3, False)]
    self.cells_layer_norm = [make_cell(4, layer_norm=True), make_cell(5, layer_norm=True)]

  def check(self, chains, time=TIME, matmul_dtype=None, graph=False, rtol=1e-5, atol=1e-5,
            reset_after=True, layer_norm=False, dropout=False):
    cells_ = (self.cells_layer_norm if layer_norm else
              self.cells if reset_after else self.cells_reset_before)[:chains]
    batches = [data(10 + i, time) for i in range(chains)]
    xs, h0s, d_outs = ([b[j] for b in batches] for j in range(3))
    drops = ([tf.constant(np.random.RandomState(i).binomial(1, 0.7, (BATCH, UNITS)) / 0.7,
                          tf.float32) for i in range(chains)] if dropout else None)

    def both():
      return [values_and_gradients(cells_, xs, h0s, d_outs, on, matmul_dtype, drops)
              for on in (True, False)]

    (fused, fused_grads), (plain, plain_grads) = tf.function(both)() if graph else both()
    self.assertLen(fused, chains)
    for cell, x, h0, out, expected in zip(cells_, xs, h0s, fused, plain):
      self.assertEqual(out.shape, (BATCH, time, UNITS))
      self.assertAllClose(out, expected, rtol=rtol, atol=atol)
      if matmul_dtype is None and not layer_norm and not dropout:
        self.assertAllClose(out, ref.gru_run(x.numpy(), h0.numpy(), ref.gru_weights(cell)),
                            atol=1e-5)
    self.assertLen(fused_grads, len(plain_grads))
    for got, expected in zip(fused_grads, plain_grads):
      self.assertIsNotNone(got)
      self.assertAllClose(got, expected, rtol=rtol, atol=atol)

  @parameterized.named_parameters(
      ("one_chain", 1, True), ("two_chains", 2, True),
      ("one_chain_reset_before", 1, False), ("two_chains_reset_before", 2, False))
  def test_matches_plain_ops_eager(self, chains, reset_after):
    self.check(chains, reset_after=reset_after)

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  @pytest.mark.slow
  def test_matches_plain_ops_in_graph(self, reset_after):
    self.check(2, graph=True, reset_after=reset_after)

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  def test_single_step(self, reset_after):
    self.check(2, time=1, reset_after=reset_after)

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  def test_bfloat16_products(self, reset_after):
    # The products' operands are bfloat16 on both paths, the gates float32: the same values
    # up to float32 rounding.
    self.check(2, matmul_dtype="bfloat16", rtol=1e-4, atol=1e-4, reset_after=reset_after)

  @parameterized.named_parameters(("eager", False, None), ("graph", True, None),
                                  ("bfloat16_products", True, "bfloat16"))
  @pytest.mark.slow
  def test_layer_norm_matches_plain_ops(self, graph, matmul_dtype):
    # The normalization stays plain ops around the cell; gains and biases included.
    tolerance = 1e-5 if matmul_dtype is None else 1e-4
    self.check(2, graph=graph, matmul_dtype=matmul_dtype, layer_norm=True, rtol=tolerance,
               atol=tolerance)

  @pytest.mark.slow  # runs the sequence with dropout masks eagerly and traced
  def test_recurrent_dropout(self):
    self.check(2, graph=True, dropout=True)

  def test_layer_norm_step_is_the_equation(self):
    cell = self.cells_layer_norm[0]
    x, h0, _ = data(6, time=1)
    got, _ = cell(x[:, 0], h0)
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
      with kernels.precision_scope(compiled_cell=True):
        return run_cells(self.cells[:1], [x], [tf.zeros([tf.shape(x)[0], UNITS])])[0]

    x = data(3)[0]
    zeros = tf.zeros([BATCH, UNITS])
    self.assertAllClose(states(x), run_cells(self.cells[:1], [x], [zeros])[0], atol=1e-5)
    self.assertEqual(states(x[:2, :4]).shape, (2, 4, UNITS))
    self.assertLen(traces, 1)

  def test_missing_upstream_gradient(self):
    # Only the first chain's states reach the loss: the second gets no gradient at all.
    xs, h0s = [data(1)[0], data(2)[0]], [data(1)[1], data(2)[1]]
    with tf.GradientTape() as tape:
      tape.watch(xs)
      with kernels.precision_scope(compiled_cell=True):
        outputs = run_cells(self.cells, xs, h0s)
      loss = tf.reduce_sum(outputs[0])
    d_x0, d_x1 = tape.gradient(loss, xs)
    self.assertGreater(float(tf.reduce_sum(tf.abs(d_x0))), 0.0)
    self.assertTrue(d_x1 is None or not np.any(d_x1.numpy()))

  @parameterized.named_parameters(("reset_after", True), ("reset_before", False))
  def test_the_scope_chooses_the_ops(self, reset_after):
    cell = self.cells[0] if reset_after else self.cells_reset_before[0]
    x, h0, _ = data(7)

    def run(compiled_cell, x=x):
      with kernels.precision_scope(compiled_cell=compiled_cell):
        return run_cells([cell], [x], [h0])

    names = {op for op in op_types(lambda: run(True)) if op.startswith("Nmt")}
    if LIBRARY is None:  # where the library cannot be had, the same step on plain ops
      self.assertEmpty(names)
    else:
      self.assertEqual(names, {"NmtGruGates"} if reset_after
                       else {"NmtGruResetGates", "NmtGruUpdate"})
    self.assertFalse(any(op.startswith("Nmt") for op in op_types(lambda: run(False))))
    # bfloat16 activations (mixed_bfloat16) keep the plain ops: the cell is float32 only.
    self.assertFalse(any(op.startswith("Nmt") for op in
                         op_types(lambda: cells.reset_after(*[tf.zeros([2, n], tf.bfloat16)
                                                              for n in (12, 12, 4)]))))


@parameterized.named_parameters(("float32", None), ("bfloat16_products", "bfloat16"))
class CompiledOpsTest(tf.test.TestCase, parameterized.TestCase):
  """The ops one by one against the plain ops of cells.py: values and every gradient."""

  def setUp(self):
    super().setUp()
    if LIBRARY is None:
      self.skipTest(f"the compiled cell is unavailable: {compiled.unavailable_reason()}")

  def test_values_and_gradients(self, matmul_dtype):
    rng = np.random.default_rng(0)
    b, u = 5, 7
    x, hu, u_rh = (tf.constant(rng.normal(size=(b, n)), tf.float32) for n in (3 * u, 3 * u, u))
    h = tf.constant(rng.normal(size=(b, u)), tf.float32)
    hu_zr = hu[:, :2 * u]

    def run(on):
      with kernels.precision_scope(matmul_dtype, compiled_cell=on):
        with tf.GradientTape() as tape:
          tape.watch([x, hu, h, u_rh, hu_zr])
          after = cells.reset_after(x, hu, h)
          zr, rh = cells.reset_gates(x, hu_zr, h)
          before = cells.update(x, u_rh * rh, h, zr)
          loss = tf.reduce_sum(after * tf.range(u, dtype=tf.float32)) + tf.reduce_sum(
              before ** 2) + tf.reduce_sum(zr * 0.3)
        return [after, before, zr, rh] + tape.gradient(loss, [x, hu, h, u_rh, hu_zr])

    for got, want in zip(run(True), run(False)):
      self.assertAllClose(got, want, atol=1e-6, rtol=1e-6)

  def test_additive_score(self, matmul_dtype):
    rng = np.random.default_rng(1)
    keys = tf.constant(rng.normal(size=(3, 6, 5)), tf.float32)
    query = tf.constant(rng.normal(size=(3, 5)), tf.float32)
    v = tf.constant(rng.normal(size=(5,)), tf.float32)
    d_scores = tf.constant(rng.normal(size=(3, 6)) * (np.arange(6) < 4), tf.float32)

    def run(on):
      with kernels.precision_scope(matmul_dtype, compiled_cell=on):
        with tf.GradientTape() as tape:
          tape.watch([keys, query, v])
          e = cells.additive_score(keys, query, v)
          loss = tf.reduce_sum(e * d_scores)
        return [e] + tape.gradient(loss, [keys, query, v])

    got, want = run(True), run(False)
    for a, b in zip(got, want):
      self.assertAllClose(a, b, atol=1e-5, rtol=1e-5)
    self.assertAllEqual(got[1][:, 4:], tf.zeros([3, 2, 5]))  # no gradient reaches padding
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "expected keys"):
      LIBRARY.nmt_additive_score(keys, query, tf.zeros([4]))

  def test_bad_shapes(self, matmul_dtype):
    del matmul_dtype
    with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError), "must be|Dimension"):
      LIBRARY.nmt_gru_gates(tf.zeros([2, 12]), tf.zeros([2, 12]), tf.zeros([2, 5]))
    with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError),
                                "3 \\* units|divisible"):
      LIBRARY.nmt_gru_gates(tf.zeros([2, 13]), tf.zeros([2, 13]), tf.zeros([2, 4]))


@pytest.mark.slow  # starts processes
class LibraryTest(tf.test.TestCase):
  """How the library is built, cached and done without (compiled.py), in fresh processes."""

  def run_python(self, code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env}, check=False,
                          timeout=SAFETY_NET)

  def test_switched_off_the_steps_run_plain_ops(self):
    done = self.run_python(
        "from nmt_tf.layers.kernels import compiled; "
        "print(compiled.library(), compiled.unavailable_reason())",
        NMT_TF_COMPILED_CELL="0")
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertEqual(done.stdout.strip(), "None NMT_TF_COMPILED_CELL=0")

  def test_no_compiler_is_one_line_and_plain_ops(self):
    cache = self.get_temp_dir()
    done = self.run_python(
        "from nmt_tf.layers.kernels import compiled; "
        "print(compiled.library()); print(compiled.unavailable_reason())",
        NMT_TF_CACHE_DIR=cache, CXX="/nonexistent/g++")
    self.assertEqual(done.returncode, 0, done.stderr)
    lines = done.stdout.strip().splitlines()
    self.assertEqual(lines[0], "None")
    self.assertStartsWith(lines[1], "no C++ compiler")
    self.assertLen(lines, 2)

  def test_built_once_into_the_cache(self):
    if LIBRARY is None:
      self.skipTest(f"the compiled cell is unavailable: {compiled.unavailable_reason()}")
    path = compiled.library_path()
    self.assertTrue(os.path.exists(path))
    self.assertStartsWith(os.path.basename(path), f"gru_cell-tf{tf.__version__}-")
    done = self.run_python("from nmt_tf.layers.kernels import compiled; "
                           "print(compiled.library() is not None)")
    self.assertEqual(done.stdout.strip(), "True")
    self.assertNotIn("compiling", done.stderr)  # loaded from the cache, not built again


if __name__ == "__main__":
  tf.test.main()
