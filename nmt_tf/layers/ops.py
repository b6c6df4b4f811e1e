"""Small tensor helpers shared by the layers: projections, masked softmax and mean."""

import tensorflow as tf

# Added to the scores of masked positions; exp() of it underflows to exactly 0 in float32.
NEG_INF = -1e9


def project(x, kernel, bias=None):
  """x W (+ b) over the last axis for any leading dims, as one 2-D matmul.

  Args:
    x: [..., in_dim].
    kernel: [in_dim, out_dim] variable or tensor (cast to x's dtype).
    bias: optional [out_dim].

  Returns:
    [..., out_dim].
  """
  x = tf.convert_to_tensor(x)
  kernel = tf.cast(kernel, x.dtype)
  if x.shape.rank == 2:
    y = tf.matmul(x, kernel)
  else:
    lead = tf.shape(x)[:-1]
    y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), kernel)  # [prod(lead), out_dim]
    y = tf.reshape(y, tf.concat([lead, [kernel.shape[-1]]], 0))  # [..., out_dim]
  if bias is not None:
    y = y + tf.cast(bias, x.dtype)
  return y


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
