"""Gradients of loop-invariant operands of per-step products, taken once after the time loop.

Inside a tf.while_loop, a tensor used unchanged at every step (a recurrent kernel W, the
encoder annotations m read by every attention step) gets its gradient accumulated step by
step in the backward loop: a thin [in, batch] x [batch, out] product and an AddN of a
full-size gradient per step. The same sum is one large, efficient product once every step's
output gradient dy_t is known. `scan_time(..., defer=True)` arranges that. Every product a
step makes through `matmul`, `attend` or `score` below is computed inside the loop with the
invariant operand's gradient stopped, plus a zero "probe" read from a loop input; the loop's
backward pass returns all dy_t stacked as the probes' gradient, and a custom gradient on the
probes turns them into the invariant operand's gradient with one product:

  matmul  y_t = x_t W                     [batch, in] x [in, out]        dW = sum_t x_t^T dy_t
  attend  y_t = sum_i a_ti m_i            [batch, n] x [batch, n, d]     dm = sum_t a_t (x) dy_t
  score   y_ti = m_i . q_t                [batch, n, d] x [batch, d]     dm = sum_t dy_t (x) q_t

The gradients with respect to the per-step operands (x_t, a_t, q_t) are unchanged. Outside a
deferring loop these functions are the plain products. Which loops defer: see
scan.py `scan_time` (bfloat16 loops by default; KernelOptions.defer_gradients sets it).
The loop being traced is trace-time state of this package (trace_state.py "deferring").
"""

import contextlib

import tensorflow as tf

from nmt_tf.layers.kernels import precision
from nmt_tf.layers.kernels import trace_state

KINDS = ("matmul", "attend", "score")


def _product(kind, x, invariant):
  if kind == "matmul":
    return precision.matmul(x, invariant)  # [batch, out] in x's dtype
  if kind == "attend":
    return tf.matmul(tf.expand_dims(x, 1), invariant)[:, 0]  # [batch, d]
  return tf.matmul(invariant, tf.expand_dims(x, -1))[:, :, 0]  # score: [batch, n]


def _invariant_gradient(kind, xs, dys):
  """Sum over time of the invariant's gradient; xs, dys stacked [time, batch, ...]."""
  if kind == "matmul":
    x2 = tf.reshape(xs, [-1, xs.shape[-1]])  # [time*batch, in]
    dy2 = tf.reshape(dys, [-1, dys.shape[-1]])  # [time*batch, out]
    return tf.matmul(x2, dy2, transpose_a=True)  # [in, out]
  if kind == "attend":
    return tf.einsum("tbn,tbd->bnd", xs, dys)  # [batch, n, d]
  return tf.einsum("tbn,tbd->bnd", dys, xs)  # score: [batch, n, d]


def matmul(x, w):
  """x [batch, in] @ w [in, out] -> [batch, out]; w is loop-invariant."""
  return _apply("matmul", x, w)


def attend(weights, memory):
  """sum_i weights[b, i] memory[b, i] -> [batch, d]; memory [batch, n, d] is loop-invariant."""
  return _apply("attend", weights, memory)


def score(memory, query):
  """memory[b, i] . query[b] -> [batch, n]; memory [batch, n, d] is loop-invariant."""
  return _apply("score", query, memory)


class _Recording:
  """Step 0 of a deferring loop (peeled, outside the loop): plain products, remembered."""

  def __init__(self):
    self.records = []  # (kind, invariant, x, y)

  def apply(self, kind, x, invariant):
    invariant = tf.convert_to_tensor(invariant)
    y = _product(kind, x, invariant)
    self.records.append((kind, invariant, x, y))
    return y


class _Looping:
  """A step inside the loop: products with stopped invariants plus this step's probes."""

  def __init__(self, kinds, probes):
    self.kinds = kinds
    self.probes = probes
    self.operands = []

  def apply(self, kind, x, invariant):
    i = len(self.operands)
    if i >= len(self.kinds) or self.kinds[i] != kind:
      raise RuntimeError("A deferring loop step made other products than its first step; "
                         "every step must make its loop-invariant products in the same order.")
    self.operands.append(x)
    return _product(kind, x, tf.stop_gradient(invariant)) + self.probes[i]


def _apply(kind, x, invariant):
  active = trace_state.get("deferring")
  if active is None:
    return _product(kind, x, invariant)
  return active.apply(kind, x, invariant)


def _activate(scope):
  """Routes the products traced inside the block through `scope`, then restores the outer."""
  return trace_state.setting("deferring", scope)


class LoopProducts:
  """The deferring protocol for one time loop (used by scan.py `scan_time`).

    products = LoopProducts()
    with products.first_step(): out0, state = step(x0, ...)   # outside the loop
    probes = products.probe_inputs(length)                     # loop inputs [time, batch, ...]
    inside the loop body, at step t:
      with products.loop_step(probe_t_list) as scope: ...; scope.operands -> to stack
    products.set_operands(stacked)                             # [time, batch, ...] each
  """

  def __init__(self):
    self.records = []
    self._stacked = None

  @contextlib.contextmanager
  def first_step(self):
    recording = _Recording()
    with _activate(recording):
      yield
    self.records = recording.records

  @property
  def kinds(self):
    return [r[0] for r in self.records]

  def first_operands(self):
    return [r[2] for r in self.records]

  def probe_inputs(self, length):
    """Zero probes [time, batch, ...], one per recorded product, linked to the invariants."""
    probes = []
    for i, (kind, invariant, _, y) in enumerate(self.records):
      zeros = tf.zeros(tf.concat([[length], tf.shape(y)], 0), y.dtype)  # [time, batch, ...]
      probes.append(self._link(i, kind, zeros, invariant))
    return probes

  def _link(self, i, kind, zeros, invariant):
    @tf.custom_gradient
    def link(zeros, invariant):
      def grad(d_probe):  # [time, batch, ...]: dy_t of every step (zero at step 0)
        xs = self._stacked[i]  # [time, batch, ...]
        # In the invariant's dtype: a bfloat16 weight's gradient is one bfloat16 product.
        dtype = invariant.dtype if kind == "matmul" else d_probe.dtype
        d_invariant = _invariant_gradient(kind, tf.cast(xs, dtype), tf.cast(d_probe, dtype))
        return None, tf.cast(d_invariant, invariant.dtype)
      return tf.identity(zeros), grad
    return link(zeros, invariant)

  @contextlib.contextmanager
  def loop_step(self, probes):
    with _activate(_Looping(self.kinds, probes)) as scope:
      yield scope
    if len(scope.operands) != len(self.records):
      raise RuntimeError("A deferring loop step made fewer products than its first step.")

  def set_operands(self, stacked):
    """The per-step operands x_t of every product, stacked [time, batch, ...]."""
    self._stacked = list(stacked)
