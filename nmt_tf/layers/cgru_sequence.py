"""The conditional GRU with additive attention over a whole target sequence, with a
hand-written backward pass (BPTT), as layers/gru_sequence.py does for the plain GRU.

Forward, per target step j (equations.md "cgru"; x1_j = W1 E y_{j-1} + b1 precomputed):
  s'_j = GRU1(x1_j, s_{j-1})                  reset-after, gru_sequence.gru_forward
  q_j = W_q s'_j,   e_ji = v^T tanh(k_i + q_j)   (k_i = U_a h_i + b_a, precomputed keys)
  alpha_j = softmax over real positions of e_j,   c_j = sum_i alpha_ji h_i
  s_j = GRU2(W2 c_j + b2, s'_j)
Backward, from ds_j (the output's gradient plus the next step's ds_{j-1}), back in time:
  dx2, du2, ds' = GRU2 backward;            dc_j = (the output's dc_j) + dx2 W2^T
  dalpha_ji = (the output's dalpha_ji) + h_i . dc_j
  de_j = alpha_j (.) (dalpha_j - alpha_j . dalpha_j)           (softmax; zero where masked)
  dk_i += de_ji v (.) (1 - tanh^2(k_i + q_j)),  dq_j = sum_i (that),  dv += sum_i de_ji tanh(.)
  ds' += dq_j W_q^T;   dx1_j, du1, ds_{j-1} = GRU1 backward
and after the loop, one product each over all steps: dU1 = sum_j s_{j-1}^T du1_j,
dW_q = sum_j s'_j^T dq_j, dW2 = sum_j c_j^T dx2_j, dU2 = sum_j s'_j^T du2_j (biases: the sums
of du1, dx2, du2) and dh_i = sum_j alpha_ji dc_j (the annotations' gradient through c).

The score's two passes are layers/fused.py's: the XLA kernels when `use_fused` picks them, else
the same arithmetic in plain ops. Used by CGRUDecoder (variant cgru, soft additive attention)
while training; decoding and export run the step-by-step code of ConditionalGRUCell.
"""

import tensorflow as tf

from nmt_tf.layers import fused as fused_kernels
from nmt_tf.layers import ops
from nmt_tf.layers.gru_sequence import gru_backward, gru_forward, kernel_gradient, product
from nmt_tf.layers.gru_sequence import stacked


def _score_backward(keys, query, v, d_score, fused):
  """(dk [batch, src_len, units], dq [batch, units], dv [units]) of e = v^T tanh(k + q)."""
  if fused:
    return fused_kernels.score_gradient(keys, query, v, d_score)
  hidden = tf.tanh(keys + query[:, None, :])  # [batch, src_len, units]
  d_pre = d_score[..., None] * v * (1.0 - hidden * hidden)  # [batch, src_len, units]
  return d_pre, tf.reduce_sum(d_pre, axis=1), tf.reduce_sum(d_score[..., None] * hidden, [0, 1])


def cgru_sequence(inputs, initial_state, memory, keys, mask, weights, fused=False):
  """Runs the conditional GRU over all target steps; see the module docstring.

  Args:
    inputs: [time, batch, 3*units], GRU1's input projections x1 (time-major).
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
  names = ("u1", "bu1", "wq", "v", "w2", "b2", "u2", "bu2")
  mask = tf.cast(mask, tf.bool)

  @tf.custom_gradient
  def run(x1, s0, memory, keys, *flat):
    w = dict(zip(names, flat))
    dtype = x1.dtype
    bu1, b2, bu2 = (tf.cast(w[n], dtype) for n in ("bu1", "b2", "bu2"))
    v = tf.cast(w["v"], keys.dtype)
    length = tf.shape(x1)[0]
    # Per step: s, s', c, alpha, q, GRU1's and GRU2's kept values (4 each).
    templates = [s0, s0, memory[:, 0], tf.cast(mask, tf.float32), keys[:, 0]]

    def body(t, s, arrays):
      s_inter, kept1 = gru_forward(x1[t], s, w["u1"], bu1)  # [batch, units]
      q = tf.cast(product(s_inter, w["wq"]), keys.dtype)  # [batch, att_units]
      scores = fused_kernels.additive_score(keys, q, v, fused)  # [batch, src_len]
      alpha = ops.masked_softmax(scores, mask)  # [batch, src_len] float32
      c = tf.matmul(tf.cast(alpha, memory.dtype)[:, None, :], memory)[:, 0]  # [batch, mem_dim]
      s, kept2 = gru_forward(product(c, w["w2"]) + b2, s_inter, w["u2"], bu2)
      values = (s, s_inter, c, alpha, q) + kept1 + kept2
      return t + 1, s, [a.write(t, x) for a, x in zip(arrays, values)]

    arrays = [stacked(x, length) for x in templates] + [stacked(s0, length) for _ in range(8)]
    _, _, arrays = tf.while_loop(lambda t, *_: t < length, body, (0, s0, arrays),
                                 maximum_iterations=length)
    kept = [a.stack() for a in arrays]  # [time, batch, ...] each
    states, inters, contexts, alphas, queries = kept[:5]
    kept1, kept2 = kept[5:9], kept[9:]

    def grad(d_states, d_contexts, d_alphas):
      s_prevs = tf.concat([s0[None], states[:-1]], axis=0)  # s_{j-1} [time, batch, units]
      extra_dc = d_contexts is not None
      extra_da = d_alphas is not None

      def back(t, ds, dk, dv, arrays):
        if d_states is not None:
          ds = ds + d_states[t]
        dx2, du2, ds_inter = gru_backward(ds, inters[t], [x[t] for x in kept2], w["u2"])
        dc = product(dx2, w["w2"], transpose_b=True)  # [batch, mem_dim]
        if extra_dc:
          dc = dc + d_contexts[t]
        alpha = alphas[t]
        d_alpha = tf.cast(tf.matmul(memory, dc[:, :, None])[:, :, 0], tf.float32)
        if extra_da:
          d_alpha = d_alpha + d_alphas[t]
        d_scores = alpha * (d_alpha - tf.reduce_sum(alpha * d_alpha, -1, keepdims=True))
        dk_t, dq, dv_t = _score_backward(keys, queries[t], v, tf.cast(d_scores, keys.dtype),
                                         fused)
        ds_inter = ds_inter + product(tf.cast(dq, dtype), w["wq"], transpose_b=True)
        dx1, du1, ds_prev = gru_backward(ds_inter, s_prevs[t], [x[t] for x in kept1], w["u1"])
        values = (dx1, du1, dq, dx2, du2, dc)
        return t - 1, ds_prev, dk + dk_t, dv + dv_t, [a.write(t, x) for a, x in
                                                        zip(arrays, values)]

      templates_back = [x1[0], x1[0], queries[0], x1[0], x1[0], contexts[0]]
      _, d_s0, d_keys, d_v, arrays_back = tf.while_loop(
          lambda t, *_: t >= 0, back,
          (length - 1, tf.zeros_like(s0), tf.zeros_like(keys), tf.zeros_like(v),
           [stacked(x, length) for x in templates_back]),
          maximum_iterations=length)
      d_x1, d_u1, d_q, d_x2, d_u2, d_c = (a.stack() for a in arrays_back)
      # dh_i = sum_j alpha_ji dc_j  [batch, src_len, mem_dim]
      d_memory = tf.einsum("tbn,tbm->bnm", tf.cast(alphas, memory.dtype), d_c)
      sums = lambda d, name: tf.cast(tf.reduce_sum(d, axis=[0, 1]), w[name].dtype)
      d_weights = {
          "u1": kernel_gradient(s_prevs, d_u1, w["u1"]), "bu1": sums(d_u1, "bu1"),
          "wq": kernel_gradient(inters, d_q, w["wq"]), "v": tf.cast(d_v, w["v"].dtype),
          "w2": kernel_gradient(contexts, d_x2, w["w2"]), "b2": sums(d_x2, "b2"),
          "u2": kernel_gradient(inters, d_u2, w["u2"]), "bu2": sums(d_u2, "bu2"),
      }
      return [d_x1, d_s0, d_memory, d_keys] + [d_weights[n] for n in names]

    return (states, contexts, alphas), grad

  return run(inputs, initial_state, memory, keys, *(weights[n] for n in names))
