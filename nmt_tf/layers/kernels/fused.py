"""The additive attention score as one fused XLA kernel forward and one backward.

  e_i = v^T tanh(k_i + q)        k_i = U_a h_i + b (precomputed keys), q = W_a s (per step)

Per target step this is elementwise work on a [batch, src_len, units] tensor (about 1 M
elements for a 2,000-token batch). Unfused, TensorFlow makes one pass over it per op (add,
tanh, mul, sum) and keeps the tanh output of every step for the backward pass, whose own ops
(mul, TanhGrad, two sums) make as many passes again: the score is memory-bound, of the order
of 30% of a training step of the reference model (micro-benchmark, docs/PERFORMANCE.md).
Fused, the forward pass reads the keys once and writes only e [batch, src_len]; the backward
pass recomputes the tanh (cheaper than storing it) and writes the three gradients

  dk_i = de_i v (.) (1 - tanh^2(k_i + q)),   dq = sum_i dk_i,   dv = sum_i de_i tanh(k_i + q).

XLA compiles each function once per input shape (batch x src_len): 0.6-0.8 s for forward
and backward of a 2,000-token batch's shape on this loaded 2-core machine; an epoch of
Multi30k in 4,096-token batches has 36 distinct shapes, so a run pays ~20-30 s once.
XLA:CPU runs a fused kernel on one thread, where the unfused ops use every core, so it does
not always pay: in interleaved train-step A/Bs of the reference model
(docs/PERFORMANCE.md) it gave +4.7% and +6.4% target tokens/s with bfloat16
products and float32 keys (`float32_bf16_matmul`, the multi30k recipes' precision) but -10.6%
and -5.3% in plain float32. KernelOptions.fused_attention="auto" (the default) therefore
resolves to it only for a model trained with bfloat16 products of float32 keys (options.py
`resolve`; mixed_bfloat16 was not measured and keeps the plain ops); decoding and the exported
SavedModel always keep the plain ops, so serving never waits for a compilation. Modes "off"
and "xla" (bench/bench_train.py --fused_attention false, xla) choose the training kernel
whatever the precision.
"""

import tensorflow as tf


def _plain_score(keys, query, v):
  hidden = tf.tanh(keys + query[..., None, :])  # [batch, src_len, units]
  return tf.reduce_sum(hidden * v, axis=-1)  # [batch, src_len]


_score = tf.function(_plain_score, jit_compile=True)


def _plain_score_grad(keys, query, v, d_score):
  hidden = tf.tanh(keys + query[:, None, :])  # [batch, src_len, units]
  d_pre = d_score[..., None] * v * (1.0 - hidden * hidden)  # [batch, src_len, units]
  d_v = tf.reduce_sum(d_score[..., None] * hidden, axis=[0, 1])  # [units]
  return d_pre, tf.reduce_sum(d_pre, axis=1), d_v  # dk, dq [batch, units], dv


_score_grad = tf.function(_plain_score_grad, jit_compile=True)


@tf.custom_gradient
def _fused_score(keys, query, v):
  def grad(d_score):
    return _score_grad(keys, query, v, tf.cast(d_score, keys.dtype))
  return _score(keys, query, v), grad


def additive_score(keys, query, v, fused=False):
  """e [batch, src_len] = v^T tanh(keys + query) over the last axis.

  Args:
    keys: [batch, src_len, units], the precomputed key side; with fused=False any
      [batch, ..., src_len, units] that broadcasts against the query.
    query: [batch, units] (or [batch, ..., units]), the projected query.
    v: [units] variable or tensor.
    fused: "xla" (or True) = the XLA kernels above; False = plain TensorFlow ops
      (the resolved KernelChoice.fused_attention). The same values up to float rounding.

  Returns:
    [batch, src_len] (or [batch, ..., src_len]) in keys' dtype.
  """
  v = tf.cast(v, keys.dtype)
  query = tf.cast(query, keys.dtype)
  return (_fused_score if fused else _plain_score)(keys, query, v)  # [batch, src_len]
