"""Attention-conditioned GRU decoders over a whole target sequence with a hand-written backward
pass (BPTT), as layers/gru_sequence.py does for the plain GRU: the conditional GRU of
dl4mt/Nematus (`cgru_sequence`), the RNNsearch decoder of Bahdanau et al. 2015
(`rnnsearch_sequence`) and Luong et al. 2015's input-feeding decoder (`luong_sequence`, at the
end of the module).

Forward, per target step j (x_j = W E y_{j-1} + b precomputed; k_i = U_a h_i + b_a keys):
  cgru (equations.md "cgru"):            s'_j = GRU1(x_j, s_{j-1})           (reset-after)
  rnnsearch (equations.md "rnnsearch"):  s'_j = s_{j-1}
  q_j = W_q s'_j,   e_ji = v^T tanh(k_i + q_j),   alpha_j = softmax over real positions of e_j,
  c_j = sum_i alpha_ji h_i
  cgru:       s_j = GRU2(W2 c_j + b2, s'_j)                (reset-after)
  rnnsearch:  s_j = GRU(x_j + C c_j, s'_j)                 (either reset placement)
Backward, from ds_j (the output's gradient plus the next step's ds_{j-1}), back in time:
  dx2, ds' = the second GRU's backward step (gru_sequence);   dc_j = (output's dc_j) + dx2 W2^T
  dalpha_ji = (the output's dalpha_ji) + h_i . dc_j
  de_j = alpha_j (.) (dalpha_j - alpha_j . dalpha_j)           (softmax; zero where masked)
  dk_i += de_ji v (.) (1 - tanh^2(k_i + q_j)),  dq_j = sum_i (that),  dv += sum_i de_ji tanh(.)
  ds' += dq_j W_q^T
  cgru: dx_j, ds_{j-1} = GRU1's backward step;   rnnsearch: dx_j = dx2, ds_{j-1} = ds'
and after the loop, one product each over all steps: the recurrent kernels'
(sum_j state_{j-1}^T du_j), dW_q = sum_j s'_j^T dq_j, dW2 = sum_j c_j^T dx2_j, the biases (sums
of du and dx2) and dh_i = sum_j alpha_ji dc_j (the annotations' gradient through c).

The score's two passes are layers/fused.py's: the XLA kernels when `use_fused` picks them, else
the same arithmetic in plain ops. Used while training by CGRUDecoder (variants cgru and
self_attentive_residual) and RNNSearchDecoder, with soft additive attention; decoding and
export run their step-by-step code.
"""

import tensorflow as tf

from nmt_tf.layers import fused as fused_kernels
from nmt_tf.layers import ops
from nmt_tf.layers import precision
from nmt_tf.layers.gru_sequence import gru_backward, gru_backward_reset_before, gru_forward
from nmt_tf.layers.gru_sequence import gru_forward_reset_before, kernel_gradient
from nmt_tf.layers.gru_sequence import stacked


def _check_weights(names, weights, who):
  missing = sorted(set(names) - set(weights))
  if missing:
    raise ValueError(f"{who} needs the weights {missing}.")


def _context_backward(memory, alpha, dc, d_alpha=None):
  """The scores' gradient [batch, src_len] float32 of c = sum_i alpha_i h_i with alpha =
  softmax(e) over real positions, from dc [batch, mem_dim] (and an output gradient of alpha):
  dalpha_i = h_i . dc + d_alpha_i,  de = alpha (.) (dalpha - alpha . dalpha)."""
  d_weights = tf.cast(tf.matmul(memory, dc[:, :, None])[:, :, 0], tf.float32)  # [batch, n]
  if d_alpha is not None:
    d_weights = d_weights + d_alpha
  return alpha * (d_weights - tf.reduce_sum(alpha * d_weights, -1, keepdims=True))


def cgru_sequence(inputs, initial_state, memory, keys, mask, weights, fused=False):
  """Runs the conditional GRU over all target steps; see the module docstring.

  Args:
    inputs: [time, batch, 3*units], GRU1's input projections x (time-major).
    initial_state: s_0 [batch, units].
    memory: annotations h [batch, src_len, mem_dim]; keys: [batch, src_len, att_units].
    mask: [batch, src_len] bool, True at real source positions.
    weights: dict of tensors, the kernels already in the product dtype (precision.weight):
      u1 [units, 3*units], bu1 [3*units] (GRU1 recurrent), wq [units, att_units], v
      [att_units], w2 [mem_dim, 3*units], b2 [3*units] (GRU2 input), u2, bu2 (GRU2 recurrent).
    fused: the score's kernels, as `fused.use_fused` returns ("xla" or False).

  Returns:
    (states s_j [time, batch, units], contexts c_j [time, batch, mem_dim], attention weights
    alpha_j [time, batch, src_len] float32).
  """
  return _sequence(inputs, initial_state, memory, keys, mask, weights, fused, first_gru=True,
                   reset_after=True)


def rnnsearch_sequence(inputs, initial_state, memory, keys, mask, weights, fused=False,
                       reset_after=False):
  """Runs the RNNsearch decoder over all target steps; see the module docstring.

  Args:
    inputs: [time, batch, 3*units], the GRU's W E y + b (time-major).
    initial_state, memory, keys, mask, fused: as for `cgru_sequence`.
    weights: wq, v as for `cgru_sequence`; w2 = C [mem_dim, 3*units]; u2 [units, 3*units] the
      GRU's recurrent kernel, bu2 its recurrent bias (reset_after only).
    reset_after: the GRU's reset placement (Bahdanau 2015: False).

  Returns:
    As `cgru_sequence`.
  """
  return _sequence(inputs, initial_state, memory, keys, mask, weights, fused, first_gru=False,
                   reset_after=reset_after)


def _sequence(inputs, initial_state, memory, keys, mask, weights, fused, first_gru,
              reset_after):
  names = (("u1", "bu1") if first_gru else ()) + ("wq", "v", "w2")
  names += (("b2",) if first_gru else ()) + ("u2",) + (("bu2",) if reset_after else ())
  _check_weights(names, weights, "cgru_sequence" if first_gru else "rnnsearch_sequence")
  mask = tf.cast(mask, tf.bool)

  @tf.custom_gradient
  def run(x, s0, memory, keys, *flat):
    w = dict(zip(names, flat))
    dtype = x.dtype
    biases = {n: tf.cast(w[n], dtype) for n in ("bu1", "b2", "bu2") if n in w}
    v = tf.cast(w["v"], keys.dtype)
    length = tf.shape(x)[0]
    units = s0.shape[-1]
    if reset_after:
      second_forward = lambda x2, h: gru_forward(x2, h, w["u2"], biases["bu2"])
    else:
      u2_split = (w["u2"][:, :2 * units], w["u2"][:, 2 * units:])  # U_zr, U_h
      second_forward = lambda x2, h: gru_forward_reset_before(x2, h, *u2_split)
    num_kept2 = 4 if reset_after else 3

    def body(t, s, arrays):
      if first_gru:
        s_inter, kept1 = gru_forward(x[t], s, w["u1"], biases["bu1"])  # s'_j [batch, units]
      else:
        s_inter, kept1 = s, ()
      q = tf.cast(precision.matmul(s_inter, w["wq"]), keys.dtype)  # [batch, att_units]
      scores = fused_kernels.additive_score(keys, q, v, fused)  # [batch, src_len]
      alpha = ops.masked_softmax(scores, mask)  # [batch, src_len] float32
      c = tf.matmul(tf.cast(alpha, memory.dtype)[:, None, :], memory)[:, 0]  # [batch, mem_dim]
      x2 = precision.matmul(c, w["w2"]) + (biases["b2"] if first_gru else x[t])  # [batch, 3*units]
      s, kept2 = second_forward(x2, s_inter)
      values = (s, c, alpha, q) + ((s_inter,) if first_gru else ()) + kept1 + kept2
      return t + 1, s, [a.write(t, value) for a, value in zip(arrays, values)]

    # Per step: s, c, alpha, q, then for cgru s' and GRU1's kept values, then GRU2's.
    templates = [s0, memory[:, 0], tf.cast(mask, tf.float32), keys[:, 0]]
    templates += [s0] * ((1 + 4 if first_gru else 0) + num_kept2)
    _, _, arrays = tf.while_loop(lambda t, *_: t < length, body,
                                 (0, s0, [stacked(a, length) for a in templates]),
                                 maximum_iterations=length)
    kept = [a.stack() for a in arrays]  # [time, batch, ...] each
    states, contexts, alphas, queries = kept[:4]
    s_prevs = tf.concat([s0[None], states[:-1]], axis=0)  # s_{j-1} [time, batch, units]
    if first_gru:
      inters, kept1, kept2 = kept[4], kept[5:9], kept[9:]
    else:
      inters, kept1, kept2 = s_prevs, [], kept[4:]

    def grad(d_states, d_contexts, d_alphas):

      def back(t, ds, dk, dv, arrays):
        if d_states is not None:
          ds = ds + d_states[t]
        kept2_t = [value[t] for value in kept2]
        if reset_after:
          dx2, du2, ds_inter = gru_backward(ds, inters[t], kept2_t, w["u2"])
        else:
          dx2, ds_inter = gru_backward_reset_before(ds, inters[t], kept2_t, *u2_split)
          du2 = None
        dc = precision.matmul(dx2, w["w2"], transpose_b=True)  # [batch, mem_dim]
        if d_contexts is not None:
          dc = dc + d_contexts[t]
        d_scores = _context_backward(memory, alphas[t], dc,
                                     None if d_alphas is None else d_alphas[t])
        dk_t, dq, dv_t = fused_kernels.score_gradient(keys, queries[t], v, d_scores, fused)
        ds_inter = ds_inter + precision.matmul(tf.cast(dq, dtype), w["wq"], transpose_b=True)
        values = [dq, dx2, dc]
        if first_gru:
          dx1, du1, ds_prev = gru_backward(ds_inter, s_prevs[t], [k1[t] for k1 in kept1],
                                           w["u1"])
          values += [dx1, du1]
        else:
          ds_prev = ds_inter
        if du2 is not None:
          values.append(du2)
        return t - 1, ds_prev, dk + dk_t, dv + dv_t, [a.write(t, value) for a, value in
                                                        zip(arrays, values)]

      templates = [queries[0], x[0], contexts[0]] + [x[0]] * ((2 if first_gru else 0)
                                                              + (1 if reset_after else 0))
      _, d_s0, d_keys, d_v, arrays = tf.while_loop(
          lambda t, *_: t >= 0, back,
          (length - 1, tf.zeros_like(s0), tf.zeros_like(keys), tf.zeros_like(v),
           [stacked(a, length) for a in templates]),
          maximum_iterations=length)
      stacks = [a.stack() for a in arrays]  # [time, batch, ...] each
      d_q, d_x2, d_c = stacks[:3]
      sums = lambda d, name: tf.cast(tf.reduce_sum(d, axis=[0, 1]), w[name].dtype)
      grads = {"wq": kernel_gradient(inters, d_q, w["wq"]), "v": tf.cast(d_v, w["v"].dtype),
               "w2": kernel_gradient(contexts, d_x2, w["w2"])}
      if first_gru:
        d_x, d_u1 = stacks[3:5]
        grads.update(u1=kernel_gradient(s_prevs, d_u1, w["u1"]), bu1=sums(d_u1, "bu1"),
                     b2=sums(d_x2, "b2"))
      else:
        d_x = d_x2
      if reset_after:
        d_u2 = stacks[-1]
        grads.update(u2=kernel_gradient(inters, d_u2, w["u2"]), bu2=sums(d_u2, "bu2"))
      else:
        r2 = kept2[1]  # the reset gates [time, batch, units]
        grads["u2"] = tf.concat(
            [kernel_gradient(inters, d_x2[..., :2 * units], w["u2"]),
             kernel_gradient(r2 * inters, d_x2[..., 2 * units:], w["u2"])], axis=1)
      # dh_i = sum_j alpha_ji dc_j  [batch, src_len, mem_dim]
      d_memory = tf.einsum("tbn,tbm->bnm", tf.cast(alphas, memory.dtype), d_c)
      return [d_x, d_s0, d_memory, d_keys] + [grads[n] for n in names]

    return (states, contexts, alphas), grad

  return run(inputs, initial_state, memory, keys, *(weights[n] for n in names))


def luong_sequence(inputs, initial_state, memory, keys, mask, weights):
  """Luong et al. 2015's decoder (equations.md "luong": input feeding, GRU reset-after,
  bilinear score) over all target steps, with a hand-written backward pass.

  Forward, per step j (x_j = W E y_{j-1} + b precomputed; k_i = W_a h_i for the general score,
  h_i for dot; h~_0 = 0):
    s_j = GRU(x_j + W_f h~_{j-1}, s_{j-1}),   e_ji = k_i . s_j,   alpha_j = softmax(e_j),
    c_j = sum_i alpha_ji h_i,   h~_j = tanh(W_c [c_j ; s_j])
  Backward, from dh~_j (the output's gradient plus the next step's feed gradient) and ds_j:
    dp = dh~_j (.) (1 - h~_j^2),  [dc_j ; ds^c] = dp W_c^T,  dalpha_ji = h_i . dc_j,
    de_j = alpha_j (.) (dalpha_j - alpha_j . dalpha_j),  ds_j += ds^c + sum_i de_ji k_i,
    dx_j, ds_{j-1} = GRU backward step,  dh~_{j-1} = dx_j W_f^T
  and after the loop: dW_c = sum_j [c_j ; s_j]^T dp_j, dW_f = sum_j h~_{j-1}^T dx_j, the GRU's
  dU and db_U, dh_i = sum_j alpha_ji dc_j and dk_i = sum_j de_ji s_j.

  Args:
    inputs: [time, batch, 3*units], the GRU's W E y + b (time-major).
    initial_state: s_0 [batch, units].
    memory: [batch, src_len, mem_dim]; keys: [batch, src_len, units]; mask: [batch, src_len].
    weights: dict of tensors in the product dtype: wf [units, 3*units] (input feeding), u
      [units, 3*units], bu [3*units] (the GRU's recurrent kernel and bias), wc
      [mem_dim + units, units].

  Returns:
    (h~_j [time, batch, units], alpha_j [time, batch, src_len] float32).
  """
  names = ("wf", "u", "bu", "wc")
  _check_weights(names, weights, "luong_sequence")
  mask = tf.cast(mask, tf.bool)

  @tf.custom_gradient
  def run(x, s0, memory, keys, *flat):
    w = dict(zip(names, flat))
    bu = tf.cast(w["bu"], x.dtype)
    length = tf.shape(x)[0]
    mem_dim = memory.shape[-1]

    def body(t, s, h_tilde, arrays):
      x_in = x[t] + precision.matmul(h_tilde, w["wf"])  # [batch, 3*units]
      s, kept = gru_forward(x_in, s, w["u"], bu)  # [batch, units]
      scores = tf.matmul(keys, tf.cast(s, keys.dtype)[:, :, None])[:, :, 0]  # [batch, src_len]
      alpha = ops.masked_softmax(scores, mask)  # [batch, src_len] float32
      c = tf.matmul(tf.cast(alpha, memory.dtype)[:, None, :], memory)[:, 0]  # [batch, mem_dim]
      h_tilde = tf.tanh(precision.matmul(tf.concat([c, tf.cast(s, c.dtype)], -1), w["wc"]))
      values = (s, h_tilde, c, alpha) + kept
      return t + 1, s, h_tilde, [a.write(t, value) for a, value in zip(arrays, values)]

    templates = [s0, s0, memory[:, 0], tf.cast(mask, tf.float32)] + [s0] * 4
    _, _, _, arrays = tf.while_loop(
        lambda t, *_: t < length, body,
        (0, s0, tf.zeros_like(s0), [stacked(a, length) for a in templates]),
        maximum_iterations=length)
    states, tildes, contexts, alphas, *kept = [a.stack() for a in arrays]  # [time, batch, ...]
    s_prevs = tf.concat([s0[None], states[:-1]], axis=0)  # s_{j-1}
    tilde_prevs = tf.concat([tf.zeros_like(s0)[None], tildes[:-1]], axis=0)  # h~_{j-1}

    def grad(d_tildes, d_alphas):

      def back(t, ds, d_tilde, arrays):
        if d_tildes is not None:
          d_tilde = d_tilde + d_tildes[t]
        h_tilde = tildes[t]
        dp = d_tilde * (1.0 - h_tilde * h_tilde)  # [batch, units]
        d_cs = precision.matmul(dp, w["wc"], transpose_b=True)  # [batch, mem_dim + units]
        dc = d_cs[:, :mem_dim]
        d_scores = _context_backward(memory, alphas[t], dc,
                                     None if d_alphas is None else d_alphas[t])
        d_scores = tf.cast(d_scores, keys.dtype)  # [batch, src_len]
        ds_score = tf.matmul(d_scores[:, None, :], keys)[:, 0]  # [batch, units]
        ds = ds + tf.cast(d_cs[:, mem_dim:], ds.dtype) + tf.cast(ds_score, ds.dtype)
        dx, du, ds_prev = gru_backward(ds, s_prevs[t], [k[t] for k in kept], w["u"])
        d_tilde_prev = precision.matmul(dx, w["wf"], transpose_b=True)
        values = (dx, du, dp, d_scores, dc)
        return t - 1, ds_prev, d_tilde_prev, [a.write(t, value) for a, value in
                                              zip(arrays, values)]

      templates = [x[0], x[0], s0, keys[:, :, 0], contexts[0]]
      _, d_s0, _, arrays = tf.while_loop(
          lambda t, *_: t >= 0, back,
          (length - 1, tf.zeros_like(s0), tf.zeros_like(s0),
           [stacked(a, length) for a in templates]),
          maximum_iterations=length)
      d_x, d_u, d_p, d_scores, d_c = [a.stack() for a in arrays]  # [time, batch, ...]
      grads = {
          "wf": kernel_gradient(tilde_prevs, d_x, w["wf"]),
          "u": kernel_gradient(s_prevs, d_u, w["u"]),
          "bu": tf.cast(tf.reduce_sum(d_u, axis=[0, 1]), w["bu"].dtype),
          "wc": kernel_gradient(tf.concat([contexts, tf.cast(states, contexts.dtype)], -1), d_p,
                                w["wc"]),
      }
      d_memory = tf.einsum("tbn,tbm->bnm", tf.cast(alphas, memory.dtype), d_c)
      d_keys = tf.einsum("tbn,tbu->bnu", d_scores, tf.cast(states, keys.dtype))
      return [d_x, d_s0, d_memory, d_keys] + [grads[n] for n in names]

    return (tildes, alphas), grad

  return run(inputs, initial_state, memory, keys, *(weights[n] for n in names))
