"""The distributed training step and the validation loss step, as tf.functions.

Per replica r with batch B_r (docs/EQUATIONS.md, "Training objective"):
  N = sum_r #real target tokens of B_r   (all-reduced before the forward pass)
  L_r = sum_{(y, t) in B_r} CE(y_t) / N  [+ REINFORCE term for hard attention]
  g = sum_r grad L_r                     (all-reduced), |g| its global norm,
  g <- g * min(1, clip_norm / |g|)       (Pascanu et al. 2013), then Adam.
so the update is that of the mean token loss of the global batch whatever the replica count.
Hard attention (Xu et al. 2015, sec. 4.1) adds
  -lambda_r sum_s stop_gradient(R_s - b) log alpha(sampled) / S, R_s = log p(y_s | x_s, sampled),
S the global number of sentences, and b <- decay * b + (1 - decay) * mean_s R_s after each step.
With N = train.reinforce_samples > 1, each sentence is decoded with N samples of attention
decisions s^(k) (the Monte Carlo estimate of Xu et al.'s bound), both terms are means over the
N, and sample k's baseline is b_k = sum_{j != k} R^(j) / (N - 1) (leave-one-out): it removes
how hard the sentence is from the advantage, which then measures only the attention decisions.
"""

import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.training import losses

SUM = tf.distribute.ReduceOp.SUM


class TrainStep:
  """Builds `__call__(distributed_batch) -> dict` of host-side scalars for one update.

  Args:
    model: Seq2Seq (built, created under the strategy's scope).
    optimizer: keras Adam, or a LossScaleOptimizer around it (mixed_float16).
    strategy: the tf.distribute.Strategy.
    train_config: TrainConfig (clip_norm, label_smoothing, jit_compile, ...).
    baseline, baseline_steps: tf.Variables of the REINFORCE reward baseline.
    hard_attention: add the REINFORCE term.
    smoothing_labels: the form of the label-smoothed loss, "sparse" or "dense"
      (losses.token_loss_sum; the same values, bench/bench_train.py compares their speed).
    weight_average: a weight_average.WeightAverage of the model's trainable variables,
      updated after each step, or None.
  """

  def __init__(self, model, optimizer, strategy, train_config, baseline, baseline_steps,
               hard_attention=False, smoothing_labels="sparse", weight_average=None):
    losses.check_smoothing_labels(smoothing_labels)
    self.model = model
    self.optimizer = optimizer
    self.strategy = strategy
    self.config = train_config
    self.baseline = baseline
    self.baseline_steps = baseline_steps
    self.hard_attention = hard_attention
    self.smoothing_labels = smoothing_labels
    self.weight_average = weight_average
    self.loss_scaled = hasattr(optimizer, "scale_loss") and hasattr(optimizer, "dynamic_scale")
    self._compute = tf.function(self._compute_gradients, jit_compile=train_config.jit_compile,
                                reduce_retracing=True, autograph=False) if train_config.jit_compile else \
        self._compute_gradients
    self.function = tf.function(self._step, reduce_retracing=True, autograph=False)

  def __call__(self, batch):
    return self.function(batch)

  def trace(self, batch_spec):
    """Traces the step for `batch_spec` (the training dataset's element_spec, whose batch and
    length dimensions are unknown), which every later batch then reuses: without it, the
    first batch's shapes are traced, and the second batch of another shape traces again."""
    self.function.get_concrete_function(batch_spec)

  def _compute_gradients(self, batch, global_tokens, global_sentences, baseline):
    """Forward and backward pass of one replica (no collective: can be XLA-compiled)."""
    variables = self.model.trainable_variables
    samples = self.config.reinforce_samples if self.hard_attention else 1
    if samples > 1:  # each sentence N times in a row: [b * N, ...]
      batch = {key: tf.repeat(batch[key], samples, axis=0)
               for key in ("source", "target_in", "target_out")}
    with tf.GradientTape() as tape:
      outputs = self.model({"source": batch["source"], "target_in": batch["target_in"]},
                           training=True, samples=samples)
      loss_sum, _ = losses.token_loss_sum(outputs["logits"], batch["target_out"],
                                          self.config.label_smoothing, self.smoothing_labels)
      loss_sum = loss_sum / samples  # the mean over the N samples of each sentence
      loss = loss_sum / global_tokens
      reward_sum = tf.constant(0.0)
      if self.hard_attention:
        if self.config.reinforce_reward == "to_go":
          step_reward = losses.reward_to_go(outputs["logits"], batch["target_out"])  # [b N, T]
          reward = step_reward[:, 0]  # R_1 = R, the sentence's: [b N]
        else:
          reward = step_reward = losses.sentence_log_likelihood(
              outputs["logits"], batch["target_out"])  # [b N]
        if samples > 1:
          baseline = losses.leave_one_out_baseline(step_reward, samples)  # like step_reward
        sentences = tf.cast(tf.shape(reward)[0], tf.float32) / samples
        term = self.config.reinforce_weight * losses.reinforce_loss(
            outputs["attention_log_prob"], step_reward, baseline, batch["target_out"])
        if self.config.attention_entropy_weight:
          term -= self.config.attention_entropy_weight * tf.reduce_mean(
              losses.attention_entropy(outputs["attention"], batch["target_out"]))
        loss += term * sentences / global_sentences
        reward_sum = tf.reduce_sum(reward) / samples
      scaled = self.optimizer.scale_loss(loss) if self.loss_scaled else loss
    grads = tape.gradient(scaled, variables)
    grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
             for g, v in zip(grads, variables)]
    return loss_sum, reward_sum, grads

  def _replica_step(self, batch, baseline):
    ctx = tf.distribute.get_replica_context()
    tokens = tf.reduce_sum(tf.cast(batch["target_out"] != special_tokens.PAD_ID, tf.float32))
    sentences = tf.cast(tf.shape(batch["target_out"])[0], tf.float32)
    global_tokens, global_sentences = ctx.all_reduce(SUM, [tokens, sentences])
    loss_sum, reward_sum, grads = self._compute(batch, tf.maximum(global_tokens, 1.0),
                                                tf.maximum(global_sentences, 1.0), baseline)
    grads = ctx.all_reduce(SUM, grads)  # the gradient of the global batch
    scale = tf.cast(self.optimizer.dynamic_scale, tf.float32) if self.loss_scaled else 1.0
    norm = tf.linalg.global_norm(grads) / scale
    # The optimizer all-reduces (sums) once more: hand it this replica's share. Clipping and
    # the share are one product, so the gradients are read and written once.
    factor = tf.constant(1.0 / self.strategy.num_replicas_in_sync)
    if self.config.clip_norm > 0:
      factor *= tf.minimum(1.0, self.config.clip_norm / tf.maximum(norm, 1e-12))
    grads = [g * factor for g in grads]
    self.optimizer.apply(grads, self.model.trainable_variables)
    return {"loss_sum": loss_sum, "tokens": tokens, "sentences": sentences,
            "reward_sum": reward_sum, "grad_norm": norm}

  def _step(self, batch):
    lr = self.optimizer.learning_rate
    per_replica = self.strategy.run(self._replica_step, args=(batch, self.baseline.read_value()))
    if self.weight_average is not None:
      self.weight_average.update()  # after the optimizer's update, in cross-replica context
    out = {k: self.strategy.reduce(SUM, v, axis=None)
           for k, v in per_replica.items() if k != "grad_norm"}
    out["grad_norm"] = self.strategy.reduce(tf.distribute.ReduceOp.MEAN,
                                            per_replica["grad_norm"], axis=None)
    out["loss"] = out["loss_sum"] / tf.maximum(out["tokens"], 1.0)
    out["learning_rate"] = tf.cast(lr, tf.float32)
    if self.hard_attention:
      mean_reward = out["reward_sum"] / tf.maximum(out["sentences"], 1.0)
      decay = self.config.reinforce_baseline_decay
      new = tf.where(self.baseline_steps > 0,
                     decay * self.baseline + (1.0 - decay) * mean_reward, mean_reward)
      self.baseline.assign(new)
      self.baseline_steps.assign_add(1.0)
      out["baseline"] = self.baseline.read_value()
    return out


def make_eval_loss_fn(model, source_spec=None):
  """tf.function(source, target_in, target_out) -> (sum of token NLL, tokens) with
  training=False, traced once for batches of every shape; source_spec: the sources' TensorSpec
  (default: int32 ids [batch, src_len]; images for a captioner)."""
  ids = tf.TensorSpec([None, None], tf.int32)

  @tf.function(input_signature=[source_spec or ids, ids, ids], autograph=False)
  def eval_loss(source, target_in, target_out):
    outputs = model({"source": source, "target_in": target_in}, training=False)
    return losses.token_loss_sum(outputs["logits"], target_out)
  return eval_loss
