"""Luong et al. 2015's input-feeding decoder over a whole target sequence with a hand-written
backward pass (BPTT), as attention_sequence.py does for the cGRU and RNNsearch decoders.
Used while training by LuongDecoder with a GRU and a dot or general score; decoding and export
run its step-by-step code. The GRU is gru_sequence.py's `GRUStep`; the saved values and the
per-step gradients are dicts of TensorArrays, read by name.
"""

import tensorflow as tf

from nmt_tf.layers.kernels import precision
from nmt_tf.layers.kernels.attention_sequence import context_backward
from nmt_tf.layers.kernels.gru_sequence import GRUStep, arrays_like, kernel_gradient
from nmt_tf.layers.kernels.gru_sequence import stack_steps, write_step
from nmt_tf.layers.kernels.masking import masked_softmax
from nmt_tf.layers.kernels.weights import LuongWeights, flatten, unflatten


def luong_sequence(inputs, initial_state, memory, keys, mask, weights):
  """Luong et al. 2015's decoder (docs/EQUATIONS.md "luong": input feeding, GRU reset-after,
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
    inputs: [batch, time, 3*units], the GRU's W E y + b.
    initial_state: s_0 [batch, units].
    memory: [batch, src_len, mem_dim]; keys: [batch, src_len, units]; mask: [batch, src_len].
    weights: LuongWeights, the kernels in the product dtype (precision.weight).

  Returns:
    (h~_j [batch, time, units], alpha_j [batch, time, src_len] float32).
  """
  mask = tf.cast(mask, tf.bool)

  @tf.custom_gradient
  def run(x, s0, memory, keys, *flat):
    w = unflatten(weights, flat)
    wf, wc = w.feed_kernel, w.combine_kernel
    gru = GRUStep(w.gru, x.dtype)
    length = tf.shape(x)[0]
    mem_dim = memory.shape[-1]

    def body(t, s, h_tilde, arrays):
      x_in = x[t] + precision.matmul(h_tilde, wf)  # [batch, 3*units]
      s, kept = gru.forward(x_in, s)  # [batch, units]
      scores = tf.matmul(keys, tf.cast(s, keys.dtype)[:, :, None])[:, :, 0]  # [batch, src_len]
      alpha = masked_softmax(scores, mask)  # [batch, src_len] float32
      c = tf.matmul(tf.cast(alpha, memory.dtype)[:, None, :], memory)[:, 0]  # [batch, mem_dim]
      h_tilde = tf.tanh(precision.matmul(tf.concat([c, tf.cast(s, c.dtype)], -1), wc))
      saved = {"s": s, "tilde": h_tilde, "c": c, "alpha": alpha, "gru": kept}
      return t + 1, s, h_tilde, write_step(arrays, t, saved)

    like = {"s": s0, "tilde": s0, "c": memory[:, 0], "gru": gru.kept_like(x[0], s0),
            "alpha": tf.TensorSpec(mask.shape, tf.float32)}
    _, _, _, arrays = tf.while_loop(
        lambda t, *_: t < length, body, (0, s0, tf.zeros_like(s0), arrays_like(like, length)),
        maximum_iterations=length)
    saved = stack_steps(arrays)  # [time, batch, ...] by name
    s_prevs = tf.concat([s0[None], saved["s"][:-1]], axis=0)  # s_{j-1}
    tilde_prevs = tf.concat([tf.zeros_like(s0)[None], saved["tilde"][:-1]], axis=0)  # h~_{j-1}

    def grad(d_tildes, d_alphas):

      def back(t, ds, d_tilde, arrays):
        if d_tildes is not None:
          d_tilde = d_tilde + d_tildes[t]
        h_tilde = saved["tilde"][t]
        dp = d_tilde * (1.0 - h_tilde * h_tilde)  # [batch, units]
        d_cs = precision.matmul(dp, wc, transpose_b=True)  # [batch, mem_dim + units]
        dc = d_cs[:, :mem_dim]
        d_scores = context_backward(memory, saved["alpha"][t], dc,
                                     None if d_alphas is None else d_alphas[t])
        d_scores = tf.cast(d_scores, keys.dtype)  # [batch, src_len]
        ds_score = tf.matmul(d_scores[:, None, :], keys)[:, 0]  # [batch, units]
        ds = ds + tf.cast(d_cs[:, mem_dim:], ds.dtype) + tf.cast(ds_score, ds.dtype)
        dx, ds_prev, gru_grads = gru.backward(ds, s_prevs[t], [k[t] for k in saved["gru"]])
        d_tilde_prev = precision.matmul(dx, wf, transpose_b=True)
        grads = {"dx": dx, "gru": gru_grads, "dp": dp, "d_scores": d_scores, "dc": dc}
        return t - 1, ds_prev, d_tilde_prev, write_step(arrays, t, grads)

      like = {"dx": x[0], "gru": gru.grads_like(x[0]), "dp": s0, "d_scores": keys[:, :, 0],
              "dc": memory[:, 0]}
      _, d_s0, _, arrays = tf.while_loop(
          lambda t, *_: t >= 0, back,
          (length - 1, tf.zeros_like(s0), tf.zeros_like(s0), arrays_like(like, length)),
          maximum_iterations=length)
      grads = stack_steps(arrays)  # [time, batch, ...] by name
      states, contexts = saved["s"], saved["c"]
      d_weights = LuongWeights(
          kernel_gradient(tilde_prevs, grads["dx"], wf),
          gru.weight_gradients(s_prevs, saved["gru"], grads["dx"], grads["gru"]),
          kernel_gradient(tf.concat([contexts, tf.cast(states, contexts.dtype)], -1),
                          grads["dp"], wc))
      d_memory = tf.einsum("tbn,tbm->bnm", tf.cast(saved["alpha"], memory.dtype), grads["dc"])
      d_keys = tf.einsum("tbn,tbu->bnu", grads["d_scores"], tf.cast(states, keys.dtype))
      return [grads["dx"], d_s0, d_memory, d_keys] + flatten(d_weights)

    return (saved["tilde"], saved["alpha"]), grad

  tildes, alphas = run(tf.transpose(inputs, [1, 0, 2]), initial_state, memory, keys,
                       *flatten(weights))  # time-major
  return tf.transpose(tildes, [1, 0, 2]), tf.transpose(alphas, [1, 0, 2])
