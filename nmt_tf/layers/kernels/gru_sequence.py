"""GRUs over a whole sequence with a hand-written backward pass (BPTT).

Forward, per step (docs/EQUATIONS.md, "GRU conventions", reset_after=True; gate order [z, r, h~]):
  [u_z, u_r, u_h] = U h_{t-1} + b_U
  z = sigma(x_z + u_z),  r = sigma(x_r + u_r),  n = tanh(x_h + r (.) u_h)
  h_t = z (.) h_{t-1} + (1 - z) (.) n
where x = W x_t + b is precomputed for all steps. Backward, from dh_t (the output's gradient
plus the next step's dh_{t-1}), going back in time:
  dn^ = dh_t (.) (1 - z) (.) (1 - n^2)                        (n^ = the tanh's input)
  dz^ = dh_t (.) (h_{t-1} - n) (.) z (1 - z)
  dr^ = dn^ (.) u_h (.) r (1 - r)
  dx_t = [dz^, dr^, dn^],   du_t = [dz^, dr^, dn^ (.) r]
  dh_{t-1} = dh_t (.) z + du_t U^T
and after the loop, as one product each over all steps:
  dU = sum_t h_{t-1}^T du_t,   db_U = sum_t du_t.

Autodiff of the tf.while_loop (scan.py `scan_time`) makes the same arithmetic with many
more ops per step: it pushes every intermediate of the forward step onto accumulator lists, takes
the gradients of the gate split and of the bias broadcasts, and sums U's gradient step by step
(a thin [units, batch] x [batch, 3 units] product and an AddN per step). Here the forward loop
keeps only z, r, n and u_h, and the backward loop makes one product and a dozen elementwise
ops per step, as cuDNN's GRU does. Several independent GRUs (the encoder's two directions) run
in one loop so that the executor can interleave their steps on the cores.

The reset-before GRU (Cho 2014, reset_after=False) has its own pair of steps
(`gru_backward_reset_before` states its equations). `gru_forward` and `gru_backward` are one
reset-after step each way, shared with the decoder loops (attention_sequence.py,
luong_sequence.py). Used while training by the GRU encoders and the encdec decoder (through
loops.py `TrainingLoops.gru_stack`); decoding and export keep the autodiff path, and
KernelOptions(gru_backward="autodiff") makes training take it too (A/Bs, tests).
"""

import tensorflow as tf

from nmt_tf.layers.kernels import precision
from nmt_tf.layers.kernels.layer_norm import segment_norm, segment_norm_backward
from nmt_tf.layers.kernels.weights import GRUWeights, flatten, unflatten


def gru_forward(x, h_prev, kernel, bias, gain=None, drop=None):
  """One step: x [batch, 3*units] (W x + b), h_prev [batch, units] -> (h, kept), where kept =
  (z, r, n, u_h) are what `gru_backward` needs besides h_prev; with a layer-norm gain g
  [3*units] the state's projection is g (.) a^ + b_U, a^ = layer_norm.segment_norm(U h), and
  kept also holds a^ and the segments' 1 / sigma. With a dropout mask m [batch, units] (one
  per sequence, scaled by 1 / (1 - rate)), the projection reads U (m (.) h_prev); the update
  z (.) h_prev keeps the whole state."""
  read = h_prev if drop is None else h_prev * drop
  a = precision.matmul(read, kernel)  # U h [batch, 3*units]
  normalized = ()
  if gain is not None:
    hat, inv = segment_norm(a, h_prev.shape[-1])
    a = hat * gain
    normalized = (hat, inv)
  x_z, x_r, x_h = tf.split(x, 3, axis=-1)  # 3 x [batch, units]
  u_z, u_r, u_h = tf.split(a + bias, 3, axis=-1)
  z = tf.sigmoid(x_z + u_z)
  r = tf.sigmoid(x_r + u_r)
  n = tf.tanh(x_h + r * u_h)
  return z * h_prev + (1.0 - z) * n, (z, r, n, u_h) + normalized  # h [batch, units]


def gru_backward(dh, h_prev, kept, kernel, gain=None, drop=None):
  """One step back: dh [batch, units] -> (dx [batch, 3*units], du [batch, 3*units],
  da [batch, 3*units], dh_prev [batch, units]); du is the gradient of the state's projection
  u = U h_prev + b_U (summed over steps into db_U), da that of U h_prev (into dU): du itself
  without layer norm, through `segment_norm_backward` with it (g's gradient: sum du (.) a^).
  With a dropout mask m: dh_prev = dh (.) z + m (.) (da U^T), and dU takes m (.) h_prev."""
  z, r, n, u_h = kept[:4]
  dn = dh * (1.0 - z) * (1.0 - n * n)
  dz = dh * (h_prev - n) * z * (1.0 - z)
  dr = dn * u_h * r * (1.0 - r)
  du = tf.concat([dz, dr, dn * r], axis=-1)  # [batch, 3*units]
  da = du
  if gain is not None:
    hat, inv = kept[4:]
    da = segment_norm_backward(du * gain, hat, inv, h_prev.shape[-1])
  d_read = precision.matmul(da, kernel, transpose_b=True)  # [batch, units]
  dh_prev = dh * z + (d_read if drop is None else d_read * drop)
  return tf.concat([dz, dr, dn], axis=-1), du, da, dh_prev


def kernel_gradient(inputs, d_outputs, kernel):
  """sum_t inputs_t^T d_outputs_t as one product in the kernel's dtype: inputs
  [time, batch, in], d_outputs [time, batch, out] -> [in, out]."""
  rows_in = tf.cast(tf.reshape(inputs, [-1, inputs.shape[-1]]), kernel.dtype)
  rows_out = tf.cast(tf.reshape(d_outputs, [-1, d_outputs.shape[-1]]), kernel.dtype)
  return tf.matmul(rows_in, rows_out, transpose_a=True)


def stacked(like, length):
  """A TensorArray of `length` tensors shaped and typed like `like` (a tensor or TensorSpec)."""
  return tf.TensorArray(like.dtype, size=length, element_shape=like.shape)


def arrays_like(templates, length):
  """A structure (dicts, tuples, lists) of TensorArrays, one per template, for a loop's
  saved values by name."""
  return tf.nest.map_structure(lambda like: stacked(like, length), templates)


def write_step(arrays, t, values):
  """The arrays with step t's values (the same structure) written."""
  return tf.nest.map_structure(lambda a, value: a.write(t, value), arrays, values)


def stack_steps(arrays):
  """The arrays' values stacked [time, batch, ...], in the same structure."""
  return tf.nest.map_structure(lambda a: a.stack(), arrays)


def gru_forward_reset_before(x, h_prev, kernel_zr, kernel_h):
  """One step of the reset-before GRU (Cho 2014): n = tanh(x_h + (r (.) h_prev) U_h), with
  U = [U_zr, U_h] split once before the loop -> (h, kept = (z, r, n))."""
  x_z, x_r, x_h = tf.split(x, 3, axis=-1)  # 3 x [batch, units]
  u_z, u_r = tf.split(precision.matmul(h_prev, kernel_zr), 2, axis=-1)
  z = tf.sigmoid(x_z + u_z)
  r = tf.sigmoid(x_r + u_r)
  n = tf.tanh(x_h + precision.matmul(r * h_prev, kernel_h))
  return z * h_prev + (1.0 - z) * n, (z, r, n)


def gru_backward_reset_before(dh, h_prev, kept, kernel_zr, kernel_h):
  """One step back of the reset-before GRU -> (dx [batch, 3*units], dh_prev):
    dn^ = dh (1 - z)(1 - n^2),  dz^ = dh (h_prev - n) z (1 - z),  d(rh) = dn^ U_h^T,
    dr^ = d(rh) (.) h_prev (.) r (1 - r),  dx = [dz^, dr^, dn^],
    dh_prev = dh (.) z + d(rh) (.) r + [dz^, dr^] U_zr^T.
  The kernel's gradient is [sum h_prev^T [dz^, dr^], sum (r (.) h_prev)^T dn^], from dx."""
  z, r, n = kept
  dn = dh * (1.0 - z) * (1.0 - n * n)
  dz = dh * (h_prev - n) * z * (1.0 - z)
  d_rh = precision.matmul(dn, kernel_h, transpose_b=True)  # [batch, units]
  d_zr = tf.concat([dz, d_rh * h_prev * r * (1.0 - r)], axis=-1)  # [batch, 2*units]
  dh_prev = dh * z + d_rh * r + precision.matmul(d_zr, kernel_zr, transpose_b=True)
  return tf.concat([d_zr, dn], axis=-1), dh_prev


def gru_sequences(inputs, initial_states, weights, drops=None):
  """Runs independent GRUs over time in one loop; see the module docstring.

  Args:
    inputs: list of input projections W x + b, each [batch, time, 3*units].
    initial_states: list of h_0, each [batch, units], in the inputs' dtype.
    weights: list of GRUWeights, the recurrent kernels already in the product dtype
      (precision.py `weight`); all reset-after (with a bias) or all reset-before (None); all
      layer-normalized (a gain, reset-after only) or none.
    drops: optional list of recurrent dropout masks m [batch, units], one per GRU (reset-after
      only): each step's projection reads U (m (.) h_{t-1}) (`gru_forward`).

  Returns:
    List of the states h_1 ... h_T, each [batch, time, units].
  """
  _check_sequences(inputs, initial_states, weights, drops)
  k = len(inputs)
  drops = list(drops or ())
  inputs = [tf.transpose(x, [1, 0, 2]) for x in inputs]  # [time, batch, 3*units] each

  @tf.custom_gradient
  def run(*flat):
    xs, h0s = list(flat[:k]), list(flat[k:2 * k])
    ws = unflatten(weights, flat[2 * k:len(flat) - len(drops)])
    ms = flat[len(flat) - len(drops):] if drops else [None] * k
    steps = [GRUStep(w, x.dtype, m) for w, x, m in zip(ws, xs, ms)]
    length = tf.shape(xs[0])[0]

    def body(t, hs, arrays):
      new_hs, saved = [], []
      for step, x, h in zip(steps, xs, hs):
        h, kept = step.forward(x[t], h)
        new_hs.append(h)
        saved.append({"h": h, "kept": kept})
      return t + 1, new_hs, write_step(arrays, t, saved)

    like = [{"h": h0, "kept": step.kept_like(x[0], h0)} for step, x, h0 in zip(steps, xs, h0s)]
    _, _, arrays = tf.while_loop(lambda t, *_: t < length, body,
                                 (0, h0s, arrays_like(like, length)),
                                 maximum_iterations=length)
    saved = stack_steps(arrays)  # [time, batch, ...] each
    outputs = [chain["h"] for chain in saved]

    def grad(*d_outputs):
      # h_{t-1} for every step: [time, batch, units].
      h_prevs = [tf.concat([h0[None], o[:-1]], axis=0) for h0, o in zip(h0s, outputs)]

      def back(t, dhs, arrays):
        new_dhs, grads = [], []
        for step, dh, d_out, h_prev, chain in zip(steps, dhs, d_outputs, h_prevs, saved):
          if d_out is not None:
            dh = dh + d_out[t]
          dx, dh_prev, step_grads = step.backward(dh, h_prev[t], [v[t] for v in chain["kept"]])
          new_dhs.append(dh_prev)
          grads.append({"dx": dx, **step_grads})
        return t - 1, new_dhs, write_step(arrays, t, grads)

      like = [{"dx": x[0], **step.grads_like(x[0])} for step, x in zip(steps, xs)]
      _, dh0s, arrays = tf.while_loop(
          lambda t, *_: t >= 0, back,
          (length - 1, [tf.zeros_like(h) for h in h0s], arrays_like(like, length)),
          maximum_iterations=length)
      grads = stack_steps(arrays)  # [time, batch, 3*units] each
      d_weights = [step.weight_gradients(h_prev, chain["kept"], g["dx"], g)
                   for step, h_prev, chain, g in zip(steps, h_prevs, saved, grads)]
      return [g["dx"] for g in grads] + dh0s + flatten(d_weights) + [None] * len(drops)

    return outputs, grad

  outputs = run(*inputs, *initial_states, *flatten(weights), *drops)
  return [tf.transpose(o, [1, 0, 2]) for o in outputs]  # [batch, time, units] each


def _check_sequences(inputs, initial_states, weights, drops):
  k = len(inputs)
  reset_after = weights[0].bias is not None
  normalized = weights[0].gain is not None
  if not len(initial_states) == len(weights) == k:
    raise ValueError("gru_sequences needs one initial state and one GRUWeights per input.")
  if any((w.bias is not None) != reset_after for w in weights):
    raise ValueError("gru_sequences needs GRUs of one reset placement.")
  if any((w.gain is not None) != normalized for w in weights) or (normalized and not
                                                                     reset_after):
    raise ValueError("gru_sequences needs all GRUs layer-normalized or none, and layer "
                     "normalization needs reset-after GRUs.")
  if drops is not None and (len(drops) != k or not reset_after):
    raise ValueError("gru_sequences needs one dropout mask per GRU, and reset-after GRUs "
                     "with dropout masks.")


class GRUStep:
  """One GRU of a hand-written loop, both ways: `forward` and `backward` are its step
  (`gru_forward`/`gru_backward`, or the reset-before pair), `weight_gradients` the products
  after the loop (dU = sum_t (m (.) h_{t-1})^T da_t, db_U = sum_t du_t, dg = sum_t du_t (.) a^;
  reset-before: [sum h_{t-1}^T [dz^, dr^], sum (r (.) h_{t-1})^T dn^]).

  Args:
    weights: GRUWeights, the kernel in the product dtype; bias None for reset-before.
    dtype: the states' dtype (the bias and gain are cast to it once).
    drop: optional recurrent dropout mask [batch, units] (reset-after only).
  """

  def __init__(self, weights, dtype, drop=None):
    self.weights = weights
    self.kernel = weights.kernel
    self.reset_after = weights.bias is not None
    self.normalized = weights.gain is not None
    cast = lambda t: None if t is None else tf.cast(t, dtype)
    self.bias, self.gain, self.drop = cast(weights.bias), cast(weights.gain), cast(drop)
    if not self.reset_after:
      units = self.kernel.shape[0]
      self.split = (self.kernel[:, :2 * units], self.kernel[:, 2 * units:])  # U_zr, U_h

  def kept_like(self, x, h):
    """Templates (dtype, shape) of the kept values of a step from x [batch, 3*units] and
    h [batch, units]."""
    if not self.reset_after:
      return (h, h, h)  # z, r, n
    norm = (x, tf.TensorSpec(h.shape[:1] + [2], h.dtype)) if self.normalized else ()
    return (h, h, h, h) + norm  # z, r, n, u_h (, a^, 1 / sigma)

  def grads_like(self, x):
    """Templates of the per-step gradients `backward` returns besides dx and dh_prev."""
    if not self.reset_after:
      return {}
    return {"du": x, "da": x} if self.normalized else {"du": x}

  def forward(self, x, h_prev):
    """h [batch, units] and the kept values."""
    if self.reset_after:
      return gru_forward(x, h_prev, self.kernel, self.bias, self.gain, self.drop)
    return gru_forward_reset_before(x, h_prev, *self.split)

  def backward(self, dh, h_prev, kept):
    """(dx [batch, 3*units], dh_prev [batch, units], {"du", "da"}: the state projection's
    gradients, to be summed after the loop)."""
    if not self.reset_after:
      dx, dh_prev = gru_backward_reset_before(dh, h_prev, kept, *self.split)
      return dx, dh_prev, {}
    dx, du, da, dh_prev = gru_backward(dh, h_prev, kept, self.kernel, self.gain, self.drop)
    return dx, dh_prev, ({"du": du, "da": da} if self.normalized else {"du": du})

  def weight_gradients(self, h_prevs, kept, dxs, grads):
    """GRUWeights of the gradients, from the states read h_{t-1}, the kept values, dx and the
    `backward` gradients, all stacked [time, batch, ...]."""
    w = self.weights
    if not self.reset_after:
      units = self.kernel.shape[0]
      r = kept[1]  # the reset gates [time, batch, units]
      return GRUWeights(tf.concat(
          [kernel_gradient(h_prevs, dxs[..., :2 * units], self.kernel),
           kernel_gradient(r * h_prevs, dxs[..., 2 * units:], self.kernel)], axis=1))
    du = grads["du"]
    reads = h_prevs if self.drop is None else h_prevs * self.drop[None]  # m (.) h_{t-1}
    gain = None
    if self.normalized:
      gain = tf.cast(tf.reduce_sum(du * kept[4], axis=[0, 1]), w.gain.dtype)  # sum du (.) a^
    return GRUWeights(kernel_gradient(reads, grads.get("da", du), self.kernel),
                      tf.cast(tf.reduce_sum(du, axis=[0, 1]), w.bias.dtype), gain)
