"""Small tensor helpers shared by the layers: projections and the masked mean."""

import tensorflow as tf

from nmt_tf.layers import kernels


def project(x, kernel, bias=None, take=None):
  """x W (+ b) over the last axis for any leading dims, as one 2-D matmul (`kernels.matmul`:
  in the precision of the forward pass, W's gradient deferred inside a deferring time loop).

  Args:
    x: [..., in_dim].
    kernel: [in_dim, out_dim] variable or tensor.
    bias: optional [out_dim].
    take: optional int32 [n]: only the outputs `take` (x W[:, take] + b[take]).

  Returns:
    [..., out_dim] (or [..., n]) in x's dtype.
  """
  x = tf.convert_to_tensor(x)
  y = kernels.matmul(x, kernel, take=take)  # [..., out_dim]
  if bias is not None:
    y = y + tf.cast(bias if take is None else tf.gather(bias, take), x.dtype)
  return y


def project_on_table(x, table, bias=None, take=None):
  """x T^T (+ b) over the last axis, for an embedding table T [V, in] used as the output
  projection (tied embeddings; `kernels.matmul_transposed`).

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
