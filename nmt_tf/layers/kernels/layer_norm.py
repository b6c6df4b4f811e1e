"""Layer normalization of a GRU's projections, as Nematus normalizes its GRU transitions.

A GRU projection a = [a_z ; a_r ; a_h] ([..., 3*units], the input's W x or the state's U h)
is normalized in two segments, the gates [a_z ; a_r] (2*units) and the proposal a_h (units),
each over its own features (Ba et al. 2016, "Layer Normalization"; Nematus' GRUStep with
layer_normalize):

  a^ = (a - mu) / sqrt(sigma^2 + eps),   mu, sigma^2 the mean and variance of the segment,

and the layer then scales it by a learnt gain g [3*units] (started at 1) and adds its bias, so
LN(a) = g (.) a^ + b. Backward, for the gradient d^ of a^ (the gain's part, d^ = dLN (.) g):

  da = (d^ - mean(d^) - a^ (.) mean(d^ (.) a^)) / sqrt(sigma^2 + eps)   per segment.

`segment_norm` is the forward pass of the layers' step code and of the hand-written loops,
`segment_norm_backward` that of the loops (gru_sequence.py, attention_sequence.py).
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


def segment_norm_backward(d_hat, hat, inv, units):
  """The gradient of a [..., 3*units] from that of a^ = segment_norm(a)[0]."""
  grads = []
  for i, (d, h) in enumerate(zip(_segments(d_hat, units), _segments(hat, units))):
    mean_d = tf.reduce_mean(d, -1, keepdims=True)
    mean_dh = tf.reduce_mean(d * h, -1, keepdims=True)
    grads.append((d - mean_d - h * mean_dh) * inv[..., i:i + 1])
  return tf.concat(grads, -1)
