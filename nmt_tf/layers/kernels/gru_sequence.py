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
  """A TensorArray of `length` tensors shaped and typed like `like`."""
  return tf.TensorArray(like.dtype, size=length, element_shape=like.shape)


def norm_stats(state, length):
  """A TensorArray of `length` [batch, 2] tensors: the 1 / sigma of the two layer-norm
  segments of a state like `state` [batch, units]."""
  return tf.TensorArray(state.dtype, size=length, element_shape=state.shape[:1] + [2])


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
  dropped = drops is not None
  if dropped and (len(drops) != k or not reset_after):
    raise ValueError("gru_sequences needs one dropout mask per GRU, and reset-after GRUs "
                     "with dropout masks.")
  kernels = [w.kernel for w in weights]
  biases = [w.bias for w in weights] if reset_after else []
  gains = [w.gain for w in weights] if normalized else []
  inputs = [tf.transpose(x, [1, 0, 2]) for x in inputs]  # [time, batch, 3*units] each

  @tf.custom_gradient
  def run(*flat):
    xs, h0s, us = (list(flat[i * k:(i + 1) * k]) for i in range(3))
    length = tf.shape(xs[0])[0]
    gs = [None] * k
    ms = [tf.cast(m, x.dtype) for m, x in zip(flat[-k:], xs)] if dropped else [None] * k
    if reset_after:
      bs = [tf.cast(b, x.dtype) for b, x in zip(flat[3 * k:4 * k], xs)]
      if normalized:
        gs = [tf.cast(g, x.dtype) for g, x in zip(flat[4 * k:5 * k], xs)]
      step = [lambda x, h, i=i: gru_forward(x, h, us[i], bs[i], gs[i], ms[i])
              for i in range(k)]
    else:
      units = [h0.shape[-1] for h0 in h0s]
      splits = [(u[:, :2 * d], u[:, 2 * d:]) for u, d in zip(us, units)]  # U_zr, U_h
      step = [lambda x, h, i=i: gru_forward_reset_before(x, h, *splits[i]) for i in range(k)]

    def body(t, hs, arrays):
      new_hs, new_arrays = [], []
      for i in range(k):
        h, kept = step[i](xs[i][t], hs[i])
        new_hs.append(h)
        new_arrays.append([a.write(t, v) for a, v in zip(arrays[i], (h,) + kept)])
      return t + 1, new_hs, new_arrays

    num_kept = 4 if reset_after else 3
    # h and the kept values: h, z, r, n (, u_h (, a^ [batch, 3*units], 1 / sigma [batch, 2])).
    arrays = [[stacked(h0, length) for _ in range(1 + num_kept)]
              + ([stacked(x[0], length), norm_stats(h0, length)] if normalized else [])
              for h0, x in zip(h0s, xs)]
    _, _, arrays = tf.while_loop(lambda t, *_: t < length, body, (0, h0s, arrays),
                                 maximum_iterations=length)
    kept = [[a.stack() for a in chain] for chain in arrays]  # [time, batch, ...] each
    outputs = [chain[0] for chain in kept]

    def grad(*d_outputs):
      # h_{t-1} for every step: [time, batch, units].
      h_prevs = [tf.concat([h0[None], o[:-1]], axis=0) for h0, o in zip(h0s, outputs)]

      def back(t, dhs, d_xs, d_us, d_as):
        new_dhs, new_d_xs, new_d_us, new_d_as = [], [], [], []
        for i in range(k):
          dh = dhs[i] if d_outputs[i] is None else dhs[i] + d_outputs[i][t]
          h_prev = h_prevs[i][t]
          kept_t = [v[t] for v in kept[i][1:]]
          if reset_after:
            dx, du, da, dh_prev = gru_backward(dh, h_prev, kept_t, us[i], gs[i], ms[i])
            new_d_us.append(d_us[i].write(t, du))
            if normalized:
              new_d_as.append(d_as[i].write(t, da))
          else:
            dx, dh_prev = gru_backward_reset_before(dh, h_prev, kept_t, *splits[i])
          new_dhs.append(dh_prev)
          new_d_xs.append(d_xs[i].write(t, dx))
        return t - 1, new_dhs, new_d_xs, new_d_us, new_d_as

      _, dh0s, d_xs, d_us, d_as = tf.while_loop(
          lambda t, *_: t >= 0, back,
          (length - 1, [tf.zeros_like(h) for h in h0s], [stacked(x[0], length) for x in xs],
           [stacked(x[0], length) for x in xs] if reset_after else [],
           [stacked(x[0], length) for x in xs] if normalized else []),
          maximum_iterations=length)
      d_xs = [a.stack() for a in d_xs]  # [time, batch, 3*units]
      if not reset_after:
        d_kernels = []
        for h_prev, d_x, u, chain, d in zip(h_prevs, d_xs, us, kept, units):
          r = chain[2]  # [time, batch, units]
          d_kernels.append(tf.concat([kernel_gradient(h_prev, d_x[..., :2 * d], u),
                                      kernel_gradient(r * h_prev, d_x[..., 2 * d:], u)], 1))
        return d_xs + dh0s + d_kernels
      d_us = [a.stack() for a in d_us]  # [time, batch, 3*units]
      d_as = [a.stack() for a in d_as] if normalized else d_us  # U h's gradient
      # dU = sum_t (m (.) h_{t-1})^T da_t
      reads = h_prevs if not dropped else [h * m[None] for h, m in zip(h_prevs, ms)]
      d_kernels = [kernel_gradient(h, d, u) for h, d, u in zip(reads, d_as, us)]
      d_biases = [tf.cast(tf.reduce_sum(d, axis=[0, 1]), b.dtype)
                  for d, b in zip(d_us, flat[3 * k:4 * k])]
      d_gains = [tf.cast(tf.reduce_sum(d * chain[5], axis=[0, 1]), g.dtype)  # sum du (.) a^
                 for d, chain, g in zip(d_us, kept, gains)]
      return d_xs + dh0s + d_kernels + d_biases + d_gains + [None] * len(drops or ())

    return outputs, grad

  outputs = run(*inputs, *initial_states, *kernels, *biases, *gains, *(drops or ()))
  return [tf.transpose(o, [1, 0, 2]) for o in outputs]  # [batch, time, units] each
