"""REINFORCE for hard attention (Xu et al. 2015, sec. 4.1): the reward, the baseline, the
normalization and the diagnostics of the train step's term; docs/EQUATIONS.md, "Hard attention:
the REINFORCE estimate".

For the decisions i_t ~ Categorical(alpha_t) of row r (a sentence, or one of its N samples):
  L_r = -lambda_r mean_r sum_t A_rt log alpha_rt(i_t) - lambda_e mean_r sum_t H(alpha_rt),
  A_rt = stop_gradient(R_rt - b_rt) / max(1, sigma),
with the reward R (`reinforce.reward`)
  sentence:  R_r = log p(y | x, i)                 word_mean: R_r / |y_r|   (Xu et al.'s code)
  to_go:     R_rt = sum_{t' >= t} log p(y_t' | ...) word:      r_rt = log p(y_t | ...)
the baseline b (`reinforce.baseline`)
  moving_average: b <- d b + (1 - d) mean_r stat_r after each step (stat: R, or R / |y| for
                  word_mean and word);
  leave_one_out:  b_rk = sum_{j != k} R_rj / (N - 1) over the sentence's other samples;
  learned:        b_rt = w^T s_{t-1} + b_0 on the state the decision is drawn from, fitted by
                  min mean_rt (R_rt - b_rt)^2 with its own Adam (Mnih et al. 2014);
and sigma^2 <- d sigma^2 + (1 - d) mean_rt (R_rt - b_rt)^2 when `reinforce.normalize`
(Mnih and Gregor 2014), else sigma = 1. Rows given the expected context take no decision.
"""

import keras
import tensorflow as tf

from nmt_tf.models import losses


def rewards(kind, logits, targets):
  """(reward, statistic): the reward of each decision, [rows] (every step of the sentence) or
  [rows, tgt_len] (per step), and the per-row value whose batch mean the moving-average baseline
  follows, [rows] float32.

  Args:
    kind: "sentence", "word_mean", "to_go" or "word" (module docstring).
    logits: [rows, tgt_len, vocab].
    targets: [rows, tgt_len] ids, PAD = 0.
  """
  log_p = -losses.token_nll(logits, targets)  # [rows, tgt_len], 0 at padding
  sentence = tf.reduce_sum(log_p, axis=1)  # R [rows]
  words = tf.maximum(tf.reduce_sum(losses.target_mask(targets), axis=1), 1.0)  # |y| [rows]
  if kind == "sentence":
    return sentence, sentence
  if kind == "word_mean":
    return sentence / words, sentence / words
  if kind == "to_go":
    return tf.cumsum(log_p, axis=1, reverse=True), sentence
  if kind == "word":
    return log_p, sentence / words
  raise ValueError(f"Received reward kind={kind!r}; expected sentence, word_mean, to_go or word.")


@keras.saving.register_keras_serializable(package="nmt_tf")
class LearnedBaseline(keras.layers.Layer):
  """b_t = w^T stop_gradient(s_{t-1}) + b_0 (Mnih et al. 2014): a reward baseline that reads the
  state each attention decision is drawn from. No gradient reaches the model through it.

  Input: decision states [rows, tgt_len, units]. Output: b [rows, tgt_len] float32.
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.dense = keras.layers.Dense(1, kernel_initializer="zeros", name="w")

  def call(self, states):
    states = tf.cast(tf.stop_gradient(states), tf.float32)
    return self.dense(states)[..., 0]  # [rows, tgt_len]


def terms(config, outputs, targets, baseline, scale, samples, head=None):
  """The REINFORCE, entropy and baseline-fit terms of one replica's batch, and its statistics.

  Args:
    config: ReinforceConfig (weight, entropy_weight, reward, baseline).
    outputs: the model's training outputs: logits, attention, attention_log_prob, and with
      hard attention decision_state and attention_sampled (taken as all 1 when absent).
    targets: [rows, tgt_len] ids, rows = sentences * samples.
    baseline: scalar, the moving average b (used by baseline "moving_average").
    scale: scalar, max(1, sigma) (1 without normalization).
    samples: N, consecutive rows per sentence.
    head: the LearnedBaseline for baseline "learned".

  Returns:
    (terms, stats): terms {"reinforce", "entropy", "baseline_fit"}: scalars, means over rows
    (the train step weighs them by the replica's share of the global batch); stats: float32
    sums over the batch: reward_sum (of the statistic, over samples), decisions (the sampled
    real steps), advantage_sum and advantage_sq_sum (of A over them), raw_sq_sum (of
    (R - b)^2 over them), entropy_sum (of H(alpha_t) over the real steps), steps.
  """
  mask = losses.target_mask(targets)  # [rows, tgt_len]
  log_prob = outputs["attention_log_prob"]  # [rows, tgt_len]
  sampled = outputs.get("attention_sampled")
  if sampled is None:
    sampled = tf.ones_like(log_prob[:, 0])
  decisions = mask * sampled[:, tf.newaxis]  # [rows, tgt_len]
  reward, statistic = rewards(config.reward, outputs["logits"], targets)
  kind = config.baseline_kind()
  if kind == "leave_one_out":
    b = losses.leave_one_out_baseline(reward, samples)  # like reward
  elif kind == "learned":
    b = head(outputs["decision_state"])  # [rows, tgt_len]
  else:
    b = baseline
  raw = reward - b
  if raw.shape.rank == 1:
    raw = raw[:, tf.newaxis]
  raw = tf.stop_gradient(raw) * tf.ones_like(mask)  # R - b [rows, tgt_len]
  advantage = raw / scale
  reinforce = -config.weight * tf.reduce_mean(
      tf.reduce_sum(advantage * log_prob * mask, axis=1))
  entropy = losses.attention_entropy(outputs["attention"], targets)  # [rows]
  result = {"reinforce": reinforce, "entropy": tf.constant(0.0), "baseline_fit": tf.constant(0.0)}
  if config.entropy_weight:
    result["entropy"] = -config.entropy_weight * tf.reduce_mean(entropy)
  count = tf.reduce_sum(decisions)
  if kind == "learned":  # mean over the decisions of (R - b)^2, for the head's variables only
    target = tf.stop_gradient(reward if reward.shape.rank == 2 else reward[:, tf.newaxis])
    result["baseline_fit"] = tf.reduce_sum(decisions * tf.square(target - b)) / \
        tf.maximum(count, 1.0)
  stats = {
      "reward_sum": tf.reduce_sum(statistic) / samples,
      "decisions": count,
      "advantage_sum": tf.reduce_sum(decisions * advantage),
      "advantage_sq_sum": tf.reduce_sum(decisions * tf.square(advantage)),
      "raw_sq_sum": tf.reduce_sum(decisions * tf.square(raw)),
      "entropy_sum": tf.reduce_sum(entropy),
      "steps": tf.reduce_sum(mask),
  }
  return result, stats


def attention_variables(model):
  """The trainable variables of the model's source attention (the score's W_a, U_a, v, ...),
  or [] for a model without one."""
  decoder = getattr(model, "decoder", None)
  layer = getattr(decoder, "attention_layer", None)
  return list(layer.trainable_variables) if layer is not None else []


def summary(out):
  """The scalars of one step for TensorBoard, from the step's reduced sums (`terms` stats and
  the diagnostics' gradient norms, when present)."""
  decisions = tf.maximum(out["decisions"], 1.0)
  mean = out["advantage_sum"] / decisions
  scalars = {
      "baseline": out["baseline"],
      "advantage_mean": mean,
      "advantage_std": tf.sqrt(tf.maximum(out["advantage_sq_sum"] / decisions - mean ** 2, 0.0)),
      "attention_entropy": out["entropy_sum"] / tf.maximum(out["steps"], 1.0),
      "sampled_share": out["decisions"] / tf.maximum(out["steps"], 1.0),
      "baseline_error": tf.sqrt(out["raw_sq_sum"] / decisions),  # RMS of R - b
  }
  if "reward_scale" in out:
    scalars["reward_scale"] = out["reward_scale"]
  for key in out:
    if key.startswith("grad_norm_"):
      scalars[key] = out[key]
  return scalars
