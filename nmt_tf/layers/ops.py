"""Small tensor helpers shared by the layers: projections, masked softmax and mean."""

import tensorflow as tf

from nmt_tf.layers import deferred
from nmt_tf.layers import precision

# Added to the scores of masked positions; exp() of it underflows to exactly 0 in float32.
NEG_INF = -1e9


def project(x, kernel, bias=None):
  """x W (+ b) over the last axis for any leading dims, as one 2-D matmul.

  The product is made in the precision of layers/precision.py; for x [batch, in_dim] inside a
  time loop it goes through `deferred.matmul`.

  Args:
    x: [..., in_dim].
    kernel: [in_dim, out_dim] variable or tensor.
    bias: optional [out_dim].

  Returns:
    [..., out_dim] in x's dtype.
  """
  x = tf.convert_to_tensor(x)
  kernel = precision.weight(kernel, x.dtype)
  if x.shape.rank == 2:
    y = deferred.matmul(x, kernel)  # [batch, out_dim]
  else:
    lead = tf.shape(x)[:-1]
    y = precision.matmul(tf.reshape(x, [-1, x.shape[-1]]), kernel)  # [prod(lead), out_dim]
    y = tf.reshape(y, tf.concat([lead, [kernel.shape[-1]]], 0))  # [..., out_dim]
  if bias is not None:
    y = y + tf.cast(bias, x.dtype)
  return y


def dense(layer, x):
  """A keras Dense layer's activation(x W + b) computed by `project` (precision, deferred
  gradients inside time loops) instead of Keras' own matmul."""
  x = tf.cast(x, layer.compute_dtype)
  if not layer.built:
    layer.build(x.shape)
  y = project(x, layer.kernel, layer.bias if layer.use_bias else None)
  return layer.activation(y) if layer.activation is not None else y


def masked_softmax(scores, mask):
  """Softmax over the last axis in float32, giving masked positions exactly zero weight.

  Args:
    scores: [..., n] any float dtype.
    mask: [..., n] bool or 0/1, broadcastable to scores; True = real position.

  Returns:
    [..., n] float32 weights summing to 1 over real positions.
  """
  scores = tf.cast(scores, tf.float32)
  if mask is not None:
    scores = tf.where(tf.cast(mask, tf.bool), scores, NEG_INF)
  return tf.nn.softmax(scores, axis=-1)


def masked_mean(x, mask):
  """Mean over axis 1 of x [batch, n, dim] over real positions (mask [batch, n]) -> [batch, dim]."""
  m = tf.cast(mask, x.dtype)[:, :, None]  # [batch, n, 1]
  total = tf.reduce_sum(x * m, axis=1)  # [batch, dim]
  count = tf.maximum(tf.reduce_sum(m, axis=1), 1.0)  # [batch, 1]
  return total / count
