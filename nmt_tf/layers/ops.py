"""The vocabulary of the layers' equations: products, scores, softmax, projections.

A layer writes its equations with these and plain TensorFlow ops; each product here is made
by the speed kernels (layers/kernels: the precision of the forward pass, casts made once,
gradients of loop-invariant operands deferred inside time loops), which no layer names:

  matmul(x, w)            x W for a weight reused by every step       [..., in] -> [..., out]
  attend(a, m)            c = sum_i a_i m_i                           [b, n], [b, n, d] -> [b, d]
  score(m, q)             e_i = m_i . q                               [b, n, d], [b, d] -> [b, n]
  additive_score(k, q, v) e_i = v^T tanh(k_i + q)                     [b, n, u], [b, u] -> [b, n]
  masked_softmax(e, mask) alpha = softmax of e over real positions    [..., n] -> [..., n] f32
  segment_norm(a, units)  a GRU projection normalized per segment     [..., 3u] -> ([..., 3u], _)
  gru_reset_after(x, hu, h), gru_reset_gates(x, hu_zr, h), gru_update(x, u, h, zr)
                          a GRU step's gates and new state from its products (kernels/cells.py:
                          plain ops, or the compiled cell in a training pass)
  forward_pass(dtype)     the context of one forward pass of a model (its product dtype)
  project, project_on_table, dense, masked_mean: the helpers below.
"""

import tensorflow as tf

from nmt_tf.layers import kernels

NEG_INF = kernels.NEG_INF
matmul = kernels.matmul
attend = kernels.attend
score = kernels.score
additive_score = kernels.additive_score
masked_softmax = kernels.masked_softmax
segment_norm = kernels.segment_norm
gru_reset_after = kernels.cells.reset_after
gru_reset_gates = kernels.cells.reset_gates
gru_update = kernels.cells.update
forward_pass = kernels.precision_scope


def project(x, kernel, bias=None, take=None):
  """x W (+ b) over the last axis for any leading dims, as one 2-D matmul (`matmul`: in the
  precision of the forward pass, W's gradient deferred inside a deferring time loop).

  Args:
    x: [..., in_dim].
    kernel: [in_dim, out_dim] variable or tensor.
    bias: optional [out_dim].
    take: optional int32 [n]: only the outputs `take` (x W[:, take] + b[take]).

  Returns:
    [..., out_dim] (or [..., n]) in x's dtype.
  """
  x = tf.convert_to_tensor(x)
  y = matmul(x, kernel, take=take)  # [..., out_dim]
  if bias is not None:
    y = y + tf.cast(bias if take is None else tf.gather(bias, take), x.dtype)
  return y


def project_on_table(x, table, bias=None, take=None):
  """x T^T (+ b) over the last axis, for an embedding table T [V, in] used as the output
  projection (tied embeddings), the table cast once per pass and never copied transposed.

  Args:
    x: [..., in].
    table: [V, in] variable.
    bias: optional [V].
    take: optional int32 [n]: only the outputs `take` (x T[take]^T + b[take]).

  Returns:
    [..., V] (or [..., n]) in x's dtype.
  """
  x = tf.convert_to_tensor(x)
  y = kernels.matmul_transposed(x, table, take=take)  # [..., V]
  if bias is None:
    return y
  return y + tf.cast(bias if take is None else tf.gather(bias, take), x.dtype)


def dense(layer, x):
  """A keras Dense layer's activation(x W + b) computed by `project` (precision of the pass,
  deferred gradients inside time loops) instead of Keras' own matmul."""
  x = tf.cast(x, layer.compute_dtype)
  if not layer.built:
    layer.build(x.shape)
  y = project(x, layer.kernel, layer.bias if layer.use_bias else None)
  return layer.activation(y) if layer.activation is not None else y


def masked_mean(x, mask):
  """Mean over axis 1 of x [batch, n, dim] over real positions (mask [batch, n]) -> [batch, dim]."""
  m = tf.expand_dims(tf.cast(mask, x.dtype), -1)  # [batch, n, 1]
  total = tf.reduce_sum(x * m, axis=1)  # [batch, dim]
  count = tf.maximum(tf.reduce_sum(m, axis=1), 1.0)  # [batch, 1]
  return total / count
