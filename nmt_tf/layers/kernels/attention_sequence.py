"""Attention-conditioned GRU decoders over a whole target sequence with a hand-written backward
pass (BPTT), as gru_sequence.py does for the plain GRU: the conditional GRU of
dl4mt/Nematus (`cgru_sequence`) and the RNNsearch decoder of Bahdanau et al. 2015
(`rnnsearch_sequence`); Luong et al. 2015's input-feeding decoder is in luong_sequence.py.

Forward, per target step j (x_j = W E y_{j-1} + b precomputed; k_i = U_a h_i + b_a keys):
  cgru (docs/EQUATIONS.md "cgru"):   s'_j = GRU1(x_j, s_{j-1})           (reset-after)
  rnnsearch ("rnnsearch"):           s'_j = s_{j-1}
  q_j = W_q s'_j,   e_ji = v^T tanh(k_i + q_j),   alpha_j = softmax over real positions of e_j,
  c_j = sum_i alpha_ji h_i
  cgru:       s_j = GRU2(W2 c_j + b2, s'_j)                (reset-after)
              and with a deep transition s_j <- GRU_k(b_k, s_j) for k = 3..D (no input)
  rnnsearch:  s_j = GRU(x_j + C c_j, s'_j)                 (either reset placement)
Backward, from ds_j (the output's gradient plus the next step's ds_{j-1}), back in time:
  (deep transition: ds_j back through GRU_D .. GRU_3 first, db_k = sum dx_k)
  dx2, ds' = the second GRU's backward step (gru_sequence);   dc_j = (output's dc_j) + dx2 W2^T
  dalpha_ji = (the output's dalpha_ji) + h_i . dc_j
  de_j = alpha_j (.) (dalpha_j - alpha_j . dalpha_j)           (softmax; zero where masked)
  dk_i += de_ji v (.) (1 - tanh^2(k_i + q_j)),  dq_j = sum_i (that),  dv += sum_i de_ji tanh(.)
  ds' += dq_j W_q^T
  cgru: dx_j, ds_{j-1} = GRU1's backward step;   rnnsearch: dx_j = dx2, ds_{j-1} = ds'
and after the loop, one product each over all steps: the recurrent kernels'
(sum_j state_{j-1}^T du_j), dW_q = sum_j s'_j^T dq_j, dW2 = sum_j c_j^T dx2_j, the biases (sums
of du and dx2) and dh_i = sum_j alpha_ji dc_j (the annotations' gradient through c).

With the state memory (cgru only; the memory RNN and self-attentive RNN of Werlen et al. 2018,
layers/self_attention.py StateMemory), GRU1 reads s~_j instead of s_{j-1}:
  m_i = W_m s_i + b_m (written once, when s_i is made),   p_j = W_s s_{j-1},
  beta_j = softmax over i < j of v_m^T tanh(m_i + p_j),   s~_j = sum_{i<j} beta_ji s_i.
The buffers S = [s_0..s_n] and M = [m_0..m_n] are complete after the forward loop and row i is
never changed after step i, so the backward loop reads the final buffers, carries their
gradients dS and dM, and adds row j's, dS_j + dM_j W_m^T, to ds_j when it reaches step j (all
later steps, the only readers of row j, are done by then):
  dS_i += beta_ji ds~_j,  de^m_j = beta_j (.) (S ds~_j - beta_j . S ds~_j),
  dM_i += de^m_ji v_m (.) (1 - tanh^2(m_i + p_j)),  ds_{j-1} = dp_j W_s^T
with ds~_j = GRU1's ds_{j-1} (plus the output's gradient of s~_j); after the loop
dW_m = sum_i s_i^T dM_i, db_m = sum_i dM_i, dW_s = sum_j s_{j-1}^T dp_j, and GRU1's recurrent
kernel's gradient takes s~_j in place of s_{j-1}.

The score's two passes are fused.py's: the XLA kernels with fused="xla" (the model's
KernelOptions, resolved once), else the same arithmetic in plain ops. Used while training by
CGRUDecoder (every variant) and RNNSearchDecoder, with soft additive attention; decoding and
export run their step-by-step code. The weights come typed (weights.py CGRUWeights,
RNNSearchWeights), inputs and outputs batch-major.
"""

import tensorflow as tf

from nmt_tf.layers.kernels import fused as fused_kernels
from nmt_tf.layers.kernels import precision
from nmt_tf.layers.kernels.gru_sequence import gru_backward, gru_backward_reset_before
from nmt_tf.layers.kernels.gru_sequence import gru_forward, gru_forward_reset_before
from nmt_tf.layers.kernels.gru_sequence import kernel_gradient, norm_stats, stacked
from nmt_tf.layers.kernels.layer_norm import segment_norm, segment_norm_backward
from nmt_tf.layers.kernels.masking import masked_softmax
from nmt_tf.layers.kernels.weights import AdditiveWeights, CGRUWeights, GRUWeights
from nmt_tf.layers.kernels.weights import RNNSearchWeights, StateMemoryWeights, flatten
from nmt_tf.layers.kernels.weights import TransitionWeights, unflatten


def context_backward(memory, alpha, dc, d_alpha=None):
  """The scores' gradient [batch, src_len] float32 of c = sum_i alpha_i h_i with alpha =
  softmax(e) over real positions, from dc [batch, mem_dim] (and an output gradient of alpha):
  dalpha_i = h_i . dc + d_alpha_i,  de = alpha (.) (dalpha - alpha . dalpha)."""
  d_weights = tf.cast(tf.matmul(memory, dc[:, :, None])[:, :, 0], tf.float32)  # [batch, n]
  if d_alpha is not None:
    d_weights = d_weights + d_alpha
  return alpha * (d_weights - tf.reduce_sum(alpha * d_weights, -1, keepdims=True))


def cgru_sequence(inputs, initial_state, memory, keys, mask, weights, fused=False, drops=None):
  """Runs the conditional GRU over all target steps; see the module docstring.

  Args:
    inputs: [batch, time, 3*units], GRU1's input projections x.
    initial_state: s_0 [batch, units].
    memory: annotations h [batch, src_len, mem_dim]; keys: [batch, src_len, att_units].
    mask: [batch, src_len] bool, True at real source positions.
    weights: CGRUWeights, the kernels already in the product dtype (precision.weight); with
      its state_memory, GRU1 reads s~_j, the attention over the previous states.
    fused: the scores' kernels, "xla" or False (KernelOptions.fused_attention resolved).
    drops: optional recurrent dropout masks (m1, m2, m3, ...), each [batch, units], one per
      sequence and GRU: GRU1 reads U1 (m1 (.) s_{j-1}) (s~_j with the state memory), GRU2
      U2 (m2 (.) s'_j), a deep transition's GRU_k U_k (m_k (.) its input state)
      (gru_sequence.gru_forward).

  Returns:
    (states s_j [batch, time, units], contexts c_j [batch, time, mem_dim], attention weights
    alpha_j [batch, time, src_len] float32), and with the state memory the summaries s~_j
    [batch, time, units] as a fourth.
  """
  return _sequence(inputs, initial_state, memory, keys, mask, weights, fused, drops)


def rnnsearch_sequence(inputs, initial_state, memory, keys, mask, weights, fused=False):
  """Runs the RNNsearch decoder over all target steps; see the module docstring.

  Args:
    inputs: [batch, time, 3*units], the GRU's W E y + b.
    initial_state, memory, keys, mask, fused: as for `cgru_sequence`.
    weights: RNNSearchWeights; a GRU bias of None means the reset-before GRU (Bahdanau 2015).

  Returns:
    As `cgru_sequence`.
  """
  return _sequence(inputs, initial_state, memory, keys, mask, weights, fused, None)


def _take(values, n):
  """The next n values of an iterator, as a list."""
  return [next(values) for _ in range(n)]


def _sequence(inputs, initial_state, memory, keys, mask, weights, fused, drops):
  first_gru = isinstance(weights, CGRUWeights)  # else RNNSearchWeights
  gru = weights.gru2 if first_gru else weights.gru
  reset_after = gru.bias is not None
  normalized = gru.gain is not None
  state_memory = first_gru and weights.state_memory is not None
  if normalized and not (first_gru and weights.gru1.gain is not None
                         and weights.context_gain is not None):
    raise ValueError("Layer normalization in the attention loops needs CGRUWeights with the "
                     "gains of both GRUs and of GRU2's input (context_gain).")
  mask = tf.cast(mask, tf.bool)
  transitions = weights.transitions if first_gru else ()
  dropped = drops is not None
  num_drops = 2 + len(transitions) if dropped else 0
  if dropped and not (first_gru and reset_after and len(drops) == num_drops):
    raise ValueError("Recurrent dropout masks in the attention loops need CGRUWeights and one "
                     "mask per GRU.")

  @tf.custom_gradient
  def run(x, s0, memory, keys, *flat):
    dtype = x.dtype
    cast = lambda t: None if t is None else tf.cast(t, dtype)
    ms = [cast(m) for m in flat[len(flat) - num_drops:]] if dropped else [None] * (
        2 + len(transitions))
    m1, m2, m_deep = ms[0], ms[1], ms[2:]
    w = unflatten(weights, flat[:len(flat) - num_drops])
    # GRU_k of a deep transition: (b_k, U_k, b_U_k, g_k) in the states' dtype.
    deep = [(cast(tw.bias)[None], tw.gru.kernel, cast(tw.gru.bias), cast(tw.gru.gain))
            for tw in w.transitions] if first_gru else []
    wq, w2 = w.attention.query_kernel, w.context_kernel
    gru_w = w.gru2 if first_gru else w.gru  # the GRU that reads the context
    u2 = gru_w.kernel
    v = tf.cast(w.attention.v, keys.dtype)
    if first_gru:
      u1, bu1, b2 = w.gru1.kernel, cast(w.gru1.bias), cast(w.context_bias)
      g1, g2x = cast(w.gru1.gain), cast(w.context_gain)  # None without layer norm
    if state_memory:
      wm, ws = w.state_memory.key_kernel, w.state_memory.score.query_kernel
      bm = cast(w.state_memory.key_bias)
    length = tf.shape(x)[0]
    units = s0.shape[-1]
    if reset_after:
      bu2, g2 = cast(gru_w.bias), cast(gru_w.gain)
      second_forward = lambda x2, h: gru_forward(x2, h, u2, bu2, g2, m2)
    else:
      u2_split = (u2[:, :2 * units], u2[:, 2 * units:])  # U_zr, U_h
      second_forward = lambda x2, h: gru_forward_reset_before(x2, h, *u2_split)
    if state_memory:
      vm = tf.cast(w.state_memory.score.v, dtype)
      rows = tf.range(length + 1)  # buffer rows 0..n

      def write(buffer, t, value):  # row t of buffer [batch, n + 1, dim] := value [batch, dim]
        return tf.where((rows == t)[None, :, None], value[:, None, :], buffer)

    def body(t, s, buffers, arrays):
      s_read, read_values = s, ()
      if state_memory:
        states_buf, keys_buf = buffers  # S, M [batch, n + 1, units|mem_units]
        p = precision.matmul(s, ws)  # p_j = W_s s_{j-1} [batch, mem_units]
        scores = fused_kernels.additive_score(keys_buf, p, vm, fused)  # [batch, n + 1]
        beta = masked_softmax(scores, (rows <= t)[None])  # [batch, n + 1] float32
        s_read = tf.matmul(tf.cast(beta, dtype)[:, None, :], states_buf)[:, 0]  # s~_j
        read_values = (s_read, beta, p)
      if first_gru:
        s_inter, kept1 = gru_forward(x[t], s_read, u1, bu1, g1, m1)  # s'_j [batch, units]
      else:
        s_inter, kept1 = s, ()
      q = tf.cast(precision.matmul(s_inter, wq), keys.dtype)  # [batch, att_units]
      scores = fused_kernels.additive_score(keys, q, v, fused)  # [batch, src_len]
      alpha = masked_softmax(scores, mask)  # [batch, src_len] float32
      c = tf.matmul(tf.cast(alpha, memory.dtype)[:, None, :], memory)[:, 0]  # [batch, mem_dim]
      a2 = precision.matmul(c, w2)  # W2 c_j [batch, 3*units]
      input_values = ()
      if normalized:  # GRU2's input g (.) a^ + b2
        hat2, inv2 = segment_norm(a2, units)
        a2, input_values = hat2 * g2x, (hat2, inv2)
      x2 = a2 + (b2 if first_gru else x[t])  # [batch, 3*units]
      s, kept2 = second_forward(x2, s_inter)
      deep_values = ()
      for (b_k, u_k, bu_k, g_k), m_k in zip(deep, m_deep):  # GRU_k(b_k, s) [batch, units]
        s_in = s
        s, kept_k = gru_forward(b_k, s_in, u_k, bu_k, g_k, m_k)
        deep_values += (s_in,) + kept_k
      if state_memory:
        buffers = (write(states_buf, t + 1, s),
                   write(keys_buf, t + 1, precision.matmul(s, wm) + bm))
      values = ((s, c, alpha, q) + ((s_inter,) if first_gru else ()) + kept1 + kept2
                + input_values + read_values + deep_values)
      return t + 1, s, buffers, [a.write(t, value) for a, value in zip(arrays, values)]

    buffers = ()
    if state_memory:
      m0 = precision.matmul(s0, wm) + bm  # [batch, mem_units]
      # S, M [batch, n + 1, units|mem_units] holding s_0 and m_0 in row 0
      buffers = tuple(write(tf.tile(tf.zeros_like(row)[:, None], [1, length + 1, 1]), 0, row)
                      for row in (s0, m0))
    # Per step: s, c, alpha, q; for cgru s' and GRU1's kept values (z, r, n, u_h, and with
    # layer norm a^, 1 / sigma); GRU2's; with layer norm GRU2's input a^ and 1 / sigma; with
    # the state memory s~, beta and p.
    norm = lambda: [stacked(x[0], length), norm_stats(s0, length)] if normalized else []
    arrays = [stacked(a, length) for a in (s0, memory[:, 0], tf.cast(mask, tf.float32),
                                           keys[:, 0])]
    if first_gru:
      arrays += [stacked(s0, length) for _ in range(1 + 4)] + norm()
    arrays += [stacked(s0, length) for _ in range(4 if reset_after else 3)] + norm() + norm()
    if state_memory:
      arrays += [stacked(a, length) for a in (s0, tf.cast(buffers[1][:, :, 0], tf.float32),
                                              buffers[1][:, 0])]
    for _ in deep:  # per GRU_k: its input state and kept values
      arrays += [stacked(s0, length) for _ in range(1 + 4)] + norm()
    _, _, buffers, arrays = tf.while_loop(
        lambda t, *_: t < length, body, (0, s0, buffers, arrays), maximum_iterations=length)
    kept = iter([a.stack() for a in arrays])  # [time, batch, ...] each
    states, contexts, alphas, queries = _take(kept, 4)
    s_prevs = tf.concat([s0[None], states[:-1]], axis=0)  # s_{j-1} [time, batch, units]
    num_norm = 2 if normalized else 0
    if first_gru:
      inters, kept1 = next(kept), _take(kept, 4 + num_norm)
    else:
      inters, kept1 = s_prevs, []
    kept2 = _take(kept, (4 if reset_after else 3) + num_norm)
    input_hats, input_invs = _take(kept, 2) if normalized else (None, None)
    reads, betas, mem_queries = _take(kept, 3) if state_memory else (None, None, None)
    deep_kept = [(next(kept), _take(kept, 4 + num_norm)) for _ in deep]  # (inputs, kept_k)
    gru1_inputs = reads if state_memory else s_prevs  # the state GRU1 reads at step j

    def grad(d_states, d_contexts, d_alphas, d_reads=None):

      def back(t, ds, dk, dv, buffer_grads, arrays):
        if d_states is not None:
          ds = ds + d_states[t]
        if state_memory:  # buffer row t + 1 holds states[t]: the later steps' gradients of it
          d_buf_states, d_buf_keys, _ = buffer_grads
          ds = ds + tf.cast(d_buf_states[:, t + 1], dtype) + precision.matmul(
              tf.cast(d_buf_keys[:, t + 1], dtype), wm, transpose_b=True)
        deep_grads = []
        for (_, u_k, _, g_k), m_k, (ins_k, kept_k) in reversed(list(zip(deep, m_deep,
                                                                        deep_kept))):
          dx_k, du_k, da_k, ds = gru_backward(ds, ins_k[t], [v[t] for v in kept_k], u_k, g_k,
                                              m_k)
          deep_grads = [dx_k, du_k] + ([da_k] if normalized else []) + deep_grads
        kept2_t = [value[t] for value in kept2]
        if reset_after:
          dx2, du2, da2, ds_inter = gru_backward(ds, inters[t], kept2_t, u2, g2, m2)
        else:
          dx2, ds_inter = gru_backward_reset_before(ds, inters[t], kept2_t, *u2_split)
          du2 = None
        d_a2 = dx2  # the gradient of W2 c_j
        if normalized:
          d_a2 = segment_norm_backward(dx2 * g2x, input_hats[t], input_invs[t], units)
        dc = precision.matmul(d_a2, w2, transpose_b=True)  # [batch, mem_dim]
        if d_contexts is not None:
          dc = dc + d_contexts[t]
        d_scores = context_backward(memory, alphas[t], dc,
                                    None if d_alphas is None else d_alphas[t])
        dk_t, dq, dv_t = fused_kernels.score_gradient(keys, queries[t], v, d_scores, fused)
        ds_inter = ds_inter + precision.matmul(tf.cast(dq, dtype), wq, transpose_b=True)
        values = [dq, dx2, dc]
        if first_gru:
          dx1, du1, da1, ds_prev = gru_backward(ds_inter, gru1_inputs[t],
                                                [k1[t] for k1 in kept1], u1, g1, m1)
          values += [dx1, du1] + ([da1] if normalized else [])
        else:
          ds_prev = ds_inter
        if du2 is not None:
          values += [du2] + ([da2] if normalized else [])
        if normalized:
          values.append(d_a2)
        if state_memory:  # ds_prev is ds~_j: back through s~_j = sum_i beta_ji s_i
          if d_reads is not None:
            ds_prev = ds_prev + d_reads[t]
          d_buf_states, d_buf_keys, d_vm = buffer_grads
          d_buf_states += betas[t][:, :, None] * tf.cast(ds_prev, tf.float32)[:, None]
          d_mem_scores = context_backward(buffers[0], betas[t], ds_prev)  # [batch, n + 1]
          dm_t, dp, dvm_t = fused_kernels.score_gradient(buffers[1], mem_queries[t], vm,
                                                         d_mem_scores, fused)
          buffer_grads = (d_buf_states, d_buf_keys + tf.cast(dm_t, tf.float32),
                          d_vm + tf.cast(dvm_t, tf.float32))
          ds_prev = precision.matmul(dp, ws, transpose_b=True)  # ds_{j-1} [batch, units]
          values.append(dp)
        values += deep_grads
        return t - 1, ds_prev, dk + dk_t, dv + dv_t, buffer_grads, [
            a.write(t, value) for a, value in zip(arrays, values)]

      num_grads = (3 + (2 + (1 if normalized else 0) if first_gru else 0)
                   + ((1 + (1 if normalized else 0)) if reset_after else 0)
                   + (1 if normalized else 0))
      templates = [queries[0], x[0], contexts[0]] + [x[0]] * (num_grads - 3)
      buffer_grads = ()
      if state_memory:
        templates.append(mem_queries[0])
        # Accumulated over steps in float32 (bfloat16 sums of many small terms drift).
        buffer_grads = tuple(tf.zeros_like(b, tf.float32) for b in buffers + (vm,))
      if deep:
        templates += [x[0]] * (len(deep) * (3 if normalized else 2))
      _, d_s0, d_keys, d_v, buffer_grads, arrays = tf.while_loop(
          lambda t, *_: t >= 0, back,
          (length - 1, tf.zeros_like(s0), tf.zeros_like(keys), tf.zeros_like(v), buffer_grads,
           [stacked(a, length) for a in templates]),
          maximum_iterations=length)
      stacks = iter([a.stack() for a in arrays])  # [time, batch, ...] each
      d_q, d_x2, d_c = _take(stacks, 3)
      if first_gru:
        d_x, d_u1 = _take(stacks, 2)
        d_a1 = next(stacks) if normalized else d_u1
      else:
        d_x = d_x2
      if reset_after:
        d_u2 = next(stacks)
        d_a2 = next(stacks) if normalized else d_u2
      d_w2_products = next(stacks) if normalized else d_x2  # the gradients of W2 c_j
      sums = lambda d, like: tf.cast(tf.reduce_sum(d, axis=[0, 1]), like.dtype)
      gain_grad = lambda d, hats, like: None if like is None else sums(d * hats, like)
      attention = AdditiveWeights(kernel_gradient(inters, d_q, wq),
                                  tf.cast(d_v, w.attention.v.dtype))
      d_w2 = kernel_gradient(contexts, d_w2_products, w2)
      memory_grads = None
      if state_memory:
        d_buf_states, d_buf_keys, d_vm = buffer_grads  # row 0 holds s_0
        d_s0 = d_s0 + tf.cast(d_buf_states[:, 0], dtype) + precision.matmul(
            tf.cast(d_buf_keys[:, 0], dtype), wm, transpose_b=True)
        memory_grads = StateMemoryWeights(
            kernel_gradient(buffers[0], d_buf_keys, wm),
            sums(d_buf_keys, w.state_memory.key_bias),
            AdditiveWeights(kernel_gradient(s_prevs, next(stacks), ws),
                            tf.cast(d_vm, w.state_memory.score.v.dtype)))
      # The states the recurrent kernels multiplied: m (.) s with dropout masks.
      masked = lambda states, m: states if m is None else states * m[None]
      if first_gru:
        gru1 = GRUWeights(kernel_gradient(masked(gru1_inputs, m1), d_a1, u1),
                          sums(d_u1, w.gru1.bias),
                          gain_grad(d_u1, kept1[4] if normalized else None, w.gru1.gain))
      if reset_after:
        gru2 = GRUWeights(kernel_gradient(masked(inters, m2), d_a2, u2), sums(d_u2, gru_w.bias),
                          gain_grad(d_u2, kept2[4] if normalized else None, gru_w.gain))
      else:
        r2 = kept2[1]  # the reset gates [time, batch, units]
        gru2 = GRUWeights(tf.concat(
            [kernel_gradient(inters, d_x2[..., :2 * units], u2),
             kernel_gradient(r2 * inters, d_x2[..., 2 * units:], u2)], axis=1))
      d_transitions = []
      for tw, (ins_k, kept_k), m_k in zip(w.transitions if first_gru else (), deep_kept,
                                          m_deep):
        d_x_k, d_u_k = _take(stacks, 2)
        d_a_k = next(stacks) if normalized else d_u_k
        d_transitions.append(TransitionWeights(sums(d_x_k, tw.bias), GRUWeights(
            kernel_gradient(masked(ins_k, m_k), d_a_k, tw.gru.kernel), sums(d_u_k, tw.gru.bias),
            gain_grad(d_u_k, kept_k[4] if normalized else None, tw.gru.gain))))
      if first_gru:
        d_weights = CGRUWeights(gru1, attention, d_w2, sums(d_x2, w.context_bias), gru2,
                                memory_grads, gain_grad(d_x2, input_hats, w.context_gain),
                                tuple(d_transitions))
      else:
        d_weights = RNNSearchWeights(attention, d_w2, gru2)
      # dh_i = sum_j alpha_ji dc_j  [batch, src_len, mem_dim]
      d_memory = tf.einsum("tbn,tbm->bnm", tf.cast(alphas, memory.dtype), d_c)
      return [d_x, d_s0, d_memory, d_keys] + flatten(d_weights) + [None] * num_drops

    outputs = (states, contexts, alphas) + ((reads,) if state_memory else ())
    return outputs, grad

  outputs = run(tf.transpose(inputs, [1, 0, 2]), initial_state, memory, keys,
                *flatten(weights), *(drops or ()))  # time-major
  return tuple(tf.transpose(o, [1, 0, 2]) for o in outputs)  # [batch, time, ...] each
