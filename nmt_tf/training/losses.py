"""Training objectives (equations.md, "Training objective").

masked_nll: mean negative log-likelihood per real target token, optional label smoothing
  (Szegedy et al. 2016: q = (1 - eps) one_hot + eps / V).
reinforce_loss: hard attention (Xu et al. 2015, sec. 4.1) trained with REINFORCE, the reward
  being the sentence log-likelihood log p(y | x, sampled positions), with a baseline b:
  L = -sum_t stop_gradient(R - b) log alpha_t(sampled) / #sentences.
"""

import tensorflow as tf

from nmt_tf import special_tokens


def target_mask(targets):
  """[batch, tgt_len] float32, 1 at real target positions (not PAD)."""
  return tf.cast(tf.not_equal(targets, special_tokens.PAD_ID), tf.float32)


def token_nll(logits, targets):
  """-log p(y_t) [batch, tgt_len] float32 (0 at padding), from logits [batch, tgt_len, V]."""
  nll = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, tf.cast(logits, tf.float32))
  return nll * target_mask(targets)


def masked_nll(logits, targets, label_smoothing=0.0):
  """Mean per-token cross-entropy over real target tokens (scalar float32).

  Args:
    logits: [batch, tgt_len, vocab].
    targets: [batch, tgt_len] int ids, PAD=0 at padding.
    label_smoothing: eps in [0, 1).
  """
  total, count = token_loss_sum(logits, targets, label_smoothing)
  return total / tf.maximum(count, 1.0)


def sentence_log_likelihood(logits, targets):
  """log p(y | x) per sentence [batch] float32."""
  return -tf.reduce_sum(token_nll(logits, targets), axis=1)


def reinforce_loss(attention_log_prob, reward, baseline, targets):
  """REINFORCE surrogate for hard attention (scalar).

  Args:
    attention_log_prob: [batch, tgt_len], log alpha of the sampled positions.
    reward: [batch], e.g. sentence_log_likelihood (no gradient flows through it).
    baseline: scalar or [batch], e.g. a moving average of the reward.
    targets: [batch, tgt_len] ids (padding steps do not count).
  """
  advantage = tf.stop_gradient(reward - baseline)  # [batch]
  log_prob = tf.reduce_sum(attention_log_prob * target_mask(targets), axis=1)  # [batch]
  return -tf.reduce_mean(advantage * log_prob)


def token_loss_sum(logits, targets, label_smoothing=0.0):
  """(sum of the per-token cross-entropy over real tokens, number of real tokens), float32.

  The distributed trainer divides the sum by the token count of the global batch, so that the
  loss (and its gradient) is the same whatever the number of replicas.
  """
  if not 0.0 <= label_smoothing < 1.0:
    raise ValueError(f"Received label_smoothing={label_smoothing!r}; expected a value in [0, 1).")
  mask = target_mask(targets)  # [batch, tgt_len]
  logits = tf.cast(logits, tf.float32)
  if label_smoothing:
    vocab = tf.shape(logits)[-1]
    labels = tf.one_hot(targets, vocab) * (1.0 - label_smoothing) + \
        label_smoothing / tf.cast(vocab, tf.float32)  # [batch, tgt_len, vocab]
    per_token = tf.nn.softmax_cross_entropy_with_logits(labels, logits) * mask
  else:
    per_token = token_nll(logits, targets)
  return tf.reduce_sum(per_token), tf.reduce_sum(mask)
