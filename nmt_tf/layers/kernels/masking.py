"""The attention weights: a softmax over the real positions of a padded sequence."""

import tensorflow as tf

# Added to the scores of masked positions; exp() of it underflows to exactly 0 in float32.
NEG_INF = -1e9


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
