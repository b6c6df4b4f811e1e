"""Layer normalization of a GRU's projections, as Nematus normalizes its GRU transitions.

A GRU projection a = [a_z ; a_r ; a_h] ([..., 3*units], the input's W x or the state's U h)
is normalized in two segments, the gates [a_z ; a_r] (2*units) and the proposal a_h (units),
each over its own features (Ba et al. 2016, "Layer Normalization"; Nematus' GRUStep with
layer_normalize):

  a^ = (a - mu) / sqrt(sigma^2 + eps),   mu, sigma^2 the mean and variance of the segment,

and the layer then scales it by a learnt gain g [3*units] (started at 1) and adds its bias, so
LN(a) = g (.) a^ + b.
"""

import tensorflow as tf

EPSILON = 1e-5


def _segments(a, units):
  return a[..., :2 * units], a[..., 2 * units:]  # gates [..., 2u], proposal [..., u]


def segment_norm(a, units):
  """(a^ [..., 3*units], inv [..., 2]): a normalized in its gates and proposal segments, and
  1 / sqrt(sigma^2 + eps) of each segment (kept for the backward pass)."""
  hats, invs = [], []
  for part in _segments(a, units):
    mean, variance = tf.nn.moments(part, axes=[-1], keepdims=True)
    inv = tf.math.rsqrt(variance + EPSILON)  # [..., 1]
    hats.append((part - mean) * inv)
    invs.append(inv)
  return tf.concat(hats, -1), tf.concat(invs, -1)
