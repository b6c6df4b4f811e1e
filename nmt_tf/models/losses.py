"""Training objectives (docs/EQUATIONS.md, "Training objective").

token_loss_sum: the summed negative log-likelihood of the real target tokens and their count,
  optional label smoothing (Szegedy et al. 2016: q = (1 - eps) one_hot + eps / V; the trainer
  divides by the global batch's token count), computed without the dense q:
  CE(q, softmax(z)) = -log p_y + eps (z_y - mean_v z_v), gradient softmax(z) - q
  (smoothing_labels="sparse"; "dense" builds q, the reference form the benchmark compares).
reinforce_loss: hard attention (Xu et al. 2015, sec. 4.1) trained with REINFORCE, the reward
  being the sentence log-likelihood log p(y | x, sampled positions), with a baseline b:
  L = -sum_t stop_gradient(R - b) log alpha_t(sampled) / #sentences.
"""

import tensorflow as tf

from nmt_tf import special_tokens

SMOOTHING_LABELS = ("sparse", "dense")


def check_smoothing_labels(value):
  """Raises ValueError unless `value` is one of SMOOTHING_LABELS."""
  if value not in SMOOTHING_LABELS:
    raise ValueError(f"Received smoothing_labels={value!r}; expected one of "
                     f"{SMOOTHING_LABELS}.")


def target_mask(targets):
  """[batch, tgt_len] float32, 1 at real target positions (not PAD)."""
  return tf.cast(tf.not_equal(targets, special_tokens.PAD_ID), tf.float32)


def token_nll(logits, targets):
  """-log p(y_t) [batch, tgt_len] float32 (0 at padding), from logits [batch, tgt_len, V]."""
  nll = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, tf.cast(logits, tf.float32))
  return nll * target_mask(targets)


def sentence_log_likelihood(logits, targets):
  """log p(y | x) per sentence [batch] float32."""
  return -tf.reduce_sum(token_nll(logits, targets), axis=1)


def reward_to_go(logits, targets):
  """R_t = sum_{t' >= t} log p(y_t' | y_<t', x) per step [batch, tgt_len] float32.

  The attention decision at step t reaches only the words from t on, so R_t can replace the
  sentence's R as its reward in REINFORCE without bias, with less variance.
  """
  return tf.cumsum(-token_nll(logits, targets), axis=1, reverse=True)


def reinforce_loss(attention_log_prob, reward, baseline, targets):
  """REINFORCE surrogate for hard attention (scalar).

  -(1 / batch) sum_b sum_t (R_bt - b_bt) log alpha_bt(sampled), with R - b held constant.

  Args:
    attention_log_prob: [batch, tgt_len], log alpha of the sampled positions.
    reward: [batch] (the sentence's, every step), e.g. sentence_log_likelihood, or
      [batch, tgt_len] (per step), e.g. reward_to_go; no gradient flows through it.
    baseline: scalar, or shaped like `reward`, e.g. a moving average of the reward.
    targets: [batch, tgt_len] ids (padding steps do not count).
  """
  advantage = tf.stop_gradient(reward - baseline)  # [batch] or [batch, tgt_len]
  if advantage.shape.rank == 1:
    advantage = advantage[:, tf.newaxis]
  weighted = advantage * attention_log_prob * target_mask(targets)  # [batch, tgt_len]
  return -tf.reduce_mean(tf.reduce_sum(weighted, axis=1))


def attention_entropy(attention, targets):
  """sum_t H(alpha_t) = -sum_t sum_i alpha_ti log alpha_ti per sentence [batch] float32.

  Args:
    attention: [batch, tgt_len, src_len] alpha (0 at padded source positions).
    targets: [batch, tgt_len] ids (padding steps do not count).
  """
  alpha = tf.cast(attention, tf.float32)
  entropy = -tf.reduce_sum(alpha * tf.math.log(tf.maximum(alpha, 1e-30)), axis=-1)
  return tf.reduce_sum(entropy * target_mask(targets), axis=1)


def leave_one_out_baseline(reward, samples):
  """Each sample's baseline from the other samples of its sentence, shaped like `reward`.

  b_k = (sum_j R_j - R_k) / (N - 1) over the N consecutive samples of a sentence; it does
  not depend on sample k, so the REINFORCE estimate stays unbiased.

  Args:
    reward: [batch * N] or [batch * N, tgt_len], the N samples of each sentence in
      consecutive rows.
    samples: N >= 2.
  """
  shape = tf.shape(reward)
  grouped = tf.reshape(reward, tf.concat([[-1, samples], shape[1:]], 0))  # [batch, N, ...]
  total = tf.reduce_sum(grouped, axis=1, keepdims=True)  # [batch, 1, ...]
  return tf.reshape((total - grouped) / (samples - 1.0), shape)


def token_loss_sum(logits, targets, label_smoothing=0.0, smoothing_labels="sparse"):
  """(sum of the per-token cross-entropy over real tokens, number of real tokens), float32.

  The distributed trainer divides the sum by the token count of the global batch, so that the
  loss (and its gradient) is the same whatever the number of replicas.

  Args:
    logits: [batch, tgt_len, vocab].
    targets: [batch, tgt_len] int ids, PAD=0 at padding.
    label_smoothing: eps in [0, 1).
    smoothing_labels: how the smoothed loss is computed, the same values up to float
      rounding: "sparse" (`smoothed_cross_entropy`, no [tokens, V] label tensor) or "dense"
      (the label tensor q and softmax_cross_entropy_with_logits).
  """
  if not 0.0 <= label_smoothing < 1.0:
    raise ValueError(f"Received label_smoothing={label_smoothing!r}; expected a value in [0, 1).")
  check_smoothing_labels(smoothing_labels)
  mask = target_mask(targets)  # [batch, tgt_len]
  logits = tf.cast(logits, tf.float32)
  if label_smoothing and smoothing_labels == "dense":
    vocab = tf.shape(logits)[-1]
    labels = tf.one_hot(targets, vocab) * (1.0 - label_smoothing) + \
        label_smoothing / tf.cast(vocab, tf.float32)  # [batch, tgt_len, vocab]
    per_token = tf.nn.softmax_cross_entropy_with_logits(labels, logits) * mask
  elif label_smoothing:
    per_token = smoothed_cross_entropy(logits, targets, label_smoothing) * mask
  else:
    per_token = token_nll(logits, targets)
  return tf.reduce_sum(per_token), tf.reduce_sum(mask)


def smoothed_cross_entropy(logits, targets, label_smoothing):
  """CE(q, softmax(z)) per token [batch, tgt_len] float32, q = (1 - eps) one_hot(y) + eps / V.

  Since -sum_v q_v log p_v = -log p_y + eps (log p_y - mean_v log p_v) and log p_v - log p_y =
  z_v - z_y, CE = -log p_y + eps (z_y - mean_v z_v); the gradient is softmax(z) - q. Both come
  from the sparse cross-entropy kernel (-log p_y and softmax(z) - one_hot(y)) plus one mean over
  the vocabulary: no dense [tokens, V] label tensor (OpenNMT-tf and Joey NMT build one).

  Args:
    logits: [batch, tgt_len, V] float32 z.
    targets: [batch, tgt_len] int ids y.
    label_smoothing: eps.
  """
  vocab = tf.shape(logits)[-1]
  flat_targets = tf.reshape(tf.cast(targets, tf.int32), [-1])  # [tokens]
  eps = tf.constant(label_smoothing, tf.float32)

  @tf.custom_gradient
  def cross_entropy(flat_logits):  # [tokens, V]
    nll, backprop = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(
        features=flat_logits, labels=flat_targets)  # [tokens], softmax - one_hot [tokens, V]
    z_y = tf.gather(flat_logits, flat_targets, axis=1, batch_dims=1)  # [tokens]
    loss = nll + eps * (z_y - tf.reduce_mean(flat_logits, axis=-1))  # [tokens]

    def grad(upstream):  # [tokens]
      # softmax - q = (softmax - one_hot) - eps / V + eps one_hot, scaled per token.
      shift = eps / tf.cast(vocab, tf.float32) * upstream  # [tokens]
      scaled = backprop * upstream[:, None] - shift[:, None]  # [tokens, V]
      rows = tf.range(tf.shape(flat_targets)[0])
      return tf.tensor_scatter_nd_add(scaled, tf.stack([rows, flat_targets], axis=1),
                                      eps * upstream)  # [tokens, V]
    return loss, grad

  loss = cross_entropy(tf.reshape(logits, [-1, vocab]))  # [tokens]
  return tf.reshape(loss, tf.shape(targets))
