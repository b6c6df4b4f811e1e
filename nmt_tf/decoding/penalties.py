"""GNMT length and coverage penalties (Wu et al., 2016, section 7, equation 14).

    s(Y, X) = log P(Y | X) / lp(Y) + cp(X; Y)
    lp(Y)   = ((5 + |Y|) / 6) ** alpha
    cp(X;Y) = beta * sum_i log(min(sum_t a_ti, 1.0))

`|Y|` counts the EOS token; `a_ti` is the attention weight of target step t on source position
i, and the sum over i runs over the real (non-padding) source positions only.
"""

import tensorflow as tf

# log(0) for a source word that never received attention would make the score -inf and
# the ranking meaningless; the coverage of a word is floored at this value instead.
COVERAGE_EPSILON = 1e-10


def length_penalty(lengths, alpha):
  """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha.

  Args:
    lengths: int or float tensor of any shape: hypothesis lengths, EOS included.
    alpha: python float >= 0; 0 disables normalization (lp = 1).

  Returns:
    float32 tensor of the shape of `lengths`.
  """
  lengths = tf.cast(lengths, tf.float32)
  return tf.pow((5.0 + lengths) / 6.0, alpha)


def coverage_penalty(attention_sum, beta, src_mask=None):
  """GNMT coverage penalty cp = beta * sum_i log(min(sum_t a_ti, 1)).

  Args:
    attention_sum: float tensor [..., src_len]: attention summed over target steps.
    beta: python float >= 0; 0 disables the penalty.
    src_mask: optional bool tensor broadcastable to `attention_sum`: True on real source
      positions. Padding positions never receive attention and must be excluded.

  Returns:
    float32 tensor [...] (<= 0).
  """
  coverage = tf.minimum(tf.cast(attention_sum, tf.float32), 1.0)
  log_coverage = tf.math.log(tf.maximum(coverage, COVERAGE_EPSILON))  # [..., src_len]
  if src_mask is not None:
    log_coverage = tf.where(src_mask, log_coverage, 0.0)
  return beta * tf.reduce_sum(log_coverage, axis=-1)


def hypothesis_scores(log_probs, lengths, attention_sum, alpha=0.0, beta=0.0, src_mask=None):
  """Final score s(Y, X) of finished hypotheses.

  Args:
    log_probs: float32 [...]: log P(Y | X), EOS included.
    lengths: int32 [...]: hypothesis lengths, EOS included.
    attention_sum: float32 [..., src_len]: attention summed over the hypothesis steps.
    alpha: length-penalty exponent (0 = no normalization).
    beta: coverage-penalty weight (0 = no penalty).
    src_mask: optional bool [..., src_len], True on real source positions.

  Returns:
    float32 [...] scores (a -inf log-probability stays -inf).
  """
  scores = log_probs
  if alpha:
    scores = scores / length_penalty(lengths, alpha)
  if beta:
    scores = scores + coverage_penalty(attention_sum, beta, src_mask)
  return scores
