"""Numpy references of the equations in docs/EQUATIONS.md, written from the equations and not
from the layer code. Every function takes plain arrays (weights read from a built layer) and
works on one batch at a time; biases are included (pass zeros to drop them).

Conventions shared with the layers under test: kernels are [in_dim, out_dim] (x @ W), fused GRU
gate order [z, r, h~] and LSTM gate order [i, f, c~, o], as in Keras.
"""

import numpy as np


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def softmax(scores, mask=None):
  """Softmax over the last axis; masked (False) positions get exactly 0."""
  scores = np.asarray(scores, np.float64)
  if mask is not None:
    scores = np.where(mask, scores, -np.inf)
  scores = scores - scores.max(axis=-1, keepdims=True)
  e = np.exp(scores)
  return e / e.sum(axis=-1, keepdims=True)


def masked_mean(x, mask):
  """x [batch, n, dim], mask [batch, n] -> mean over real positions [batch, dim]."""
  m = np.asarray(mask, np.float64)[:, :, None]
  return (x * m).sum(1) / m.sum(1)


# --- GRU conventions -------------------------------------------------------------------------


def gru_step(x, h_prev, kernel, recurrent_kernel, bias, recurrent_bias=None, reset_after=True,
             drop=None):
  """One GRU step (docs/EQUATIONS.md "GRU conventions").

  z = sigma(W_z x + U_z h + b_z), r = sigma(W_r x + U_r h + b_r)
  reset-before: h~ = tanh(W x + U (r (.) h) + b)
  reset-after:  h~ = tanh(W x + r (.) (U h + b_U) + b)
  h = z (.) h_prev + (1 - z) (.) h~
  With a recurrent dropout mask m (reset-after): U (m (.) h) in z, r and h~, h_prev in h.
  """
  d = h_prev.shape[-1]
  read = h_prev if drop is None else h_prev * drop
  w_z, w_r, w_h = kernel[:, :d], kernel[:, d:2 * d], kernel[:, 2 * d:]
  u_z, u_r, u_h = recurrent_kernel[:, :d], recurrent_kernel[:, d:2 * d], recurrent_kernel[:, 2 * d:]
  b_z, b_r, b_h = bias[:d], bias[d:2 * d], bias[2 * d:]
  if recurrent_bias is None:
    recurrent_bias = np.zeros(3 * d)
  c_z, c_r, c_h = recurrent_bias[:d], recurrent_bias[d:2 * d], recurrent_bias[2 * d:]
  z = sigmoid(x @ w_z + b_z + read @ u_z + c_z)
  r = sigmoid(x @ w_r + b_r + read @ u_r + c_r)
  if reset_after:
    h_tilde = np.tanh(x @ w_h + b_h + r * (read @ u_h + c_h))
  else:
    h_tilde = np.tanh(x @ w_h + b_h + (r * h_prev) @ u_h)
  return z * h_prev + (1.0 - z) * h_tilde


def segment_layer_norm(a, d, eps=1e-5):
  """a [..., 3d] normalized in the segments [0, 2d) (gates) and [2d, 3d) (proposal), each
  (a - mean) / sqrt(var + eps) over its own features (docs/EQUATIONS.md "Layer normalization")."""
  parts = []
  for part in (a[..., :2 * d], a[..., 2 * d:]):
    mean = part.mean(-1, keepdims=True)
    var = ((part - mean) ** 2).mean(-1, keepdims=True)
    parts.append((part - mean) / np.sqrt(var + eps))
  return np.concatenate(parts, -1)


def ln_gru_step(x, h_prev, kernel, recurrent_kernel, bias, recurrent_bias, input_gain,
                recurrent_gain):
  """The layer-normalized reset-after GRU (Nematus):
  [x_z, x_r, x_h] = g_x (.) LN(W x) + b,  [u_z, u_r, u_h] = g_h (.) LN(U h_prev) + b_U,
  z = sigma(x_z + u_z), r = sigma(x_r + u_r), h~ = tanh(x_h + r (.) u_h),
  h = z (.) h_prev + (1 - z) (.) h~."""
  d = h_prev.shape[-1]
  xs = input_gain * segment_layer_norm(x @ kernel, d) + bias
  us = recurrent_gain * segment_layer_norm(h_prev @ recurrent_kernel, d) + recurrent_bias
  z = sigmoid(xs[:, :d] + us[:, :d])
  r = sigmoid(xs[:, d:2 * d] + us[:, d:2 * d])
  h_tilde = np.tanh(xs[:, 2 * d:] + r * us[:, 2 * d:])
  return z * h_prev + (1.0 - z) * h_tilde


def gru_weights(cell):
  """(kernel, recurrent_kernel, bias, recurrent_bias or None, reset_after) of a built GRUCell."""
  rb = cell.recurrent_bias.numpy() if cell.reset_after else None
  return (cell.kernel.numpy(), cell.recurrent_kernel.numpy(), cell.bias.numpy(), rb,
          cell.reset_after)


def gru_run(x, h0, weights):
  """GRU over x [batch, time, in] from h0 [batch, d] -> states [batch, time, d]."""
  k, rk, b, rb, reset_after = weights
  h, out = h0, []
  for t in range(x.shape[1]):
    h = gru_step(x[:, t], h, k, rk, b, rb, reset_after)
    out.append(h)
  return np.stack(out, 1)


def lstm_step(x, h_prev, c_prev, kernel, recurrent_kernel, bias):
  """[i, f, g, o] = W x + U h + b; c = s(f) c_prev + s(i) tanh(g); h = s(o) tanh(c)."""
  d = h_prev.shape[-1]
  gates = x @ kernel + h_prev @ recurrent_kernel + bias
  i, f, g, o = (gates[:, k * d:(k + 1) * d] for k in range(4))
  c = sigmoid(f) * c_prev + sigmoid(i) * np.tanh(g)
  h = sigmoid(o) * np.tanh(c)
  return h, c


# --- attention -------------------------------------------------------------------------------


def additive_scores(q, memory, w_q, u_h, b_h, v):
  """e_i = v^T tanh(W_a q + U_a h_i + b): q [batch, q], memory [batch, n, m] -> [batch, n]."""
  return np.tanh((q @ w_q)[:, None, :] + memory @ u_h + b_h) @ v


def dot_scores(q, memory):
  """e_i = q^T h_i."""
  return np.einsum("bd,bnd->bn", q, memory)


def general_scores(q, memory, w_a):
  """e_i = q^T W_a h_i, with w_a [mem_dim, q_dim] (h @ w_a is W_a h)."""
  return np.einsum("bd,bnd->bn", q, memory @ w_a)


def concat_scores(q, memory, w_a, b, v):
  """e_i = v^T tanh(W_a [q ; h_i] + b), w_a [q_dim + mem_dim, units]."""
  n = memory.shape[1]
  qh = np.concatenate([np.repeat(q[:, None, :], n, 1), memory], -1)  # [batch, n, q + m]
  return np.tanh(qh @ w_a + b) @ v


def attend(scores, memory, mask):
  """alpha = softmax over real positions; c = sum_i alpha_i h_i -> (c [batch, m], alpha)."""
  alpha = softmax(scores, mask)
  return np.einsum("bn,bnm->bm", alpha, memory), alpha


# --- decoder parts ---------------------------------------------------------------------------


def cgru_step(x, s_prev, memory, mask, gru1, att, gru2):
  """docs/EQUATIONS.md "cgru": s' = GRU1(x, s); c = ATT(C, q = s'); s = GRU2(c, s').

  gru1/gru2: `gru_weights` tuples; att: (w_q, u_h, b_h, v) of the additive attention.
  """
  s_inter = gru_step(x, s_prev, *gru1[:4], reset_after=gru1[4])
  context, alpha = attend(additive_scores(s_inter, memory, *att), memory, mask)
  s = gru_step(context, s_inter, *gru2[:4], reset_after=gru2[4])
  return s, context, alpha


def target_summary(emb, scores):
  """Appendix A.3.1: d_t = sum_{i=1}^{t-1} a_i E y_i, a = softmax_{1 <= i <= t-1}(scores); the
  rows of emb are E y_0 (BOS), E y_1, ...; BOS is not summarised and d_1 = 0.

  emb [batch, n, e], scores [batch, n] (all zeros gives avg) -> [batch, n, e]; row j is the
  summary read at step j (0-based), d_{j+1}, over rows 1..j.
  """
  n = emb.shape[1]
  out = np.zeros_like(emb, dtype=np.float64)
  for j in range(1, n):
    a = softmax(scores[:, 1:j + 1])  # [batch, j]
    out[:, j] = np.einsum("bi,bie->be", a, emb[:, 1:j + 1])
  return out


def cavg_scores(emb, w_y, b_y, v):
  """v^T tanh(W_y E y_i + b): [batch, n, e] -> [batch, n]."""
  return np.tanh(emb @ w_y + b_y) @ v


def state_memory(states, s_prev, time, w_m, b_m, w_s, v):
  """s~ = sum_{i <= time} a_i s_i, e_i = v^T tanh(W_m s_i + b + W_s s_prev).

  states [batch, L, d] holding s_0..s_time in rows 0..time -> (s~ [batch, d], a [batch, time+1]).
  """
  written = states[:, :time + 1]
  e = np.tanh(written @ w_m + b_m + (s_prev @ w_s)[:, None, :]) @ v  # [batch, time + 1]
  a = softmax(e)
  return np.einsum("bi,bid->bd", a, written), a


def state_attention(states, w_m, b_m, w_s, v):
  """Appendix A.3.3: s~_t = sum_{i=1}^{t-1} a_i s_i, e_i = v^T tanh(W_m s_i + b + W_s s_t),
  s~_1 = 0. states [batch, n, d] rows s_1..s_n -> s~ [batch, n, d]."""
  out = np.zeros_like(states, dtype=np.float64)
  for t in range(1, states.shape[1]):
    earlier = states[:, :t]  # s_1..s_t-1 of step t (0-based) [batch, t, d]
    e = np.tanh(earlier @ w_m + b_m + (states[:, t] @ w_s)[:, None, :]) @ v  # [batch, t]
    out[:, t] = np.einsum("bi,bid->bd", softmax(e), earlier)
  return out


def deep_output(inputs, kernels, bias, w_o, b_o):
  """W_o tanh(sum_k W_k x_k + b) + b_o, inputs/kernels: lists in the same order."""
  pre = bias + sum(x @ k for x, k in zip(inputs, kernels))
  return np.tanh(pre) @ w_o + b_o


def bridge(memory, mask, kernel, bias):
  """s_0 = tanh(W_init masked_mean(h) + b)."""
  return np.tanh(masked_mean(memory, mask) @ kernel + bias)


# --- encoders --------------------------------------------------------------------------------


def encode_sentence_birnn(x, fwd, bwd):
  """One sentence x [len, e] (real tokens only) -> (annotations [len, 2d], summary [2d])."""
  d = fwd[1].shape[0]
  f = gru_run(x[None], np.zeros((1, d)), fwd)[0]  # [len, d]
  b = gru_run(x[None, ::-1], np.zeros((1, d)), bwd)[0][::-1]  # [len, d], source order
  return np.concatenate([f, b], -1), np.concatenate([f[-1], b[0]], -1)


def conv1d_same(x, kernel, bias):
  """'same' 1-D convolution with zero padding: x [len, c_in], kernel [k, c_in, c_out]."""
  k = kernel.shape[0]
  half = k // 2
  padded = np.concatenate([np.zeros((half, x.shape[1])), x, np.zeros((half, x.shape[1]))], 0)
  return np.stack([np.einsum("kc,kco->o", padded[i:i + k], kernel) for i in range(len(x))]) + bias
