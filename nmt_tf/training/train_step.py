"""The distributed training step and the validation loss step, as tf.functions.

Per replica r with batch B_r (docs/EQUATIONS.md, "Training objective"):
  N = sum_r #real target tokens of B_r   (all-reduced before the forward pass)
  L_r = sum_{(y, t) in B_r} CE(y_t) / N  [+ REINFORCE term for hard attention]
  g = sum_r grad L_r                     (all-reduced), |g| its global norm,
  g <- g * min(1, clip_norm / |g|)       (Pascanu et al. 2013), then Adam.
so the update is that of the mean token loss of the global batch whatever the replica count.
Hard attention (Xu et al. 2015, sec. 4.1) adds the REINFORCE and entropy terms of
`reinforce.terms` (means over the sentences, weighed by the replica's share S_r / S of the global
batch's sentences) and updates the moving averages (baseline, reward scale) after each step.
With N = train.reinforce_samples > 1, each sentence is decoded with N samples of attention
decisions (the Monte Carlo estimate of Xu et al.'s bound) and every term is the mean over the N.
A learned baseline is fitted by its own optimizer; no gradient of its fit reaches the model.
Every `log_every` steps the step also measures, for hard attention, the norm of each term's
gradient on the attention's weights (`diagnose=True`; the update is the same).
"""

import dataclasses
import functools

import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.training import losses, reinforce

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
    reward_variance: tf.Variable sigma^2 of `train.reinforce_normalize`, or None.
    baseline_head, baseline_optimizer: the reinforce.LearnedBaseline of
      `train.reinforce_baseline="learned"` and the optimizer that fits it, or None.
  """

  def __init__(self, model, optimizer, strategy, train_config, baseline, baseline_steps,
               hard_attention=False, smoothing_labels="sparse", weight_average=None,
               reward_variance=None, baseline_head=None, baseline_optimizer=None):
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
    self.reward_variance = reward_variance
    self.baseline_head = baseline_head
    self.baseline_optimizer = baseline_optimizer
    self.loss_scaled = hasattr(optimizer, "scale_loss") and hasattr(optimizer, "dynamic_scale")
    options = getattr(model, "kernel_options", None)
    if train_config.jit_compile and options is not None and options.compiled_cell != "off":
      # XLA compiles stock ops only: the XLA-compiled step takes the GRU steps' plain ops.
      model.kernel_options = dataclasses.replace(options, compiled_cell="off")
    compute = lambda diagnose: functools.partial(self._compute_gradients, diagnose=diagnose)
    self._compute = {
        diagnose: tf.function(compute(diagnose), jit_compile=True, reduce_retracing=True,
                              autograph=False) if train_config.jit_compile else compute(diagnose)
        for diagnose in (False, True)}
    self.function = tf.function(functools.partial(self._step, diagnose=False),
                                reduce_retracing=True, autograph=False)
    self.diagnosing_function = tf.function(functools.partial(self._step, diagnose=True),
                                           reduce_retracing=True, autograph=False)

  def __call__(self, batch, diagnose=False):
    """One update; with `diagnose` (hard attention), also the gradient norm of each term on
    the attention's weights: `grad_norm_likelihood`, `grad_norm_reinforce`,
    `grad_norm_entropy`."""
    if diagnose and self.hard_attention:
      return self.diagnosing_function(batch)
    return self.function(batch)

  def trace(self, batch_spec):
    """Traces the step for `batch_spec` (the training dataset's element_spec, whose batch and
    length dimensions are unknown), which every later batch then reuses: without it, the
    first batch's shapes are traced, and the second batch of another shape traces again."""
    self.function.get_concrete_function(batch_spec)
    if self.hard_attention:
      self.diagnosing_function.get_concrete_function(batch_spec)

  def _compute_gradients(self, batch, global_tokens, global_sentences, baseline, scale=1.0,
                         diagnose=False):
    """Forward and backward pass of one replica (no collective: can be XLA-compiled).

    Returns (loss_sum, stats, grads, head_grads, term_grads): the token loss summed over the
    batch (a mean over samples), the REINFORCE statistics (`reinforce.terms`; empty without
    hard attention), the gradients of the model's variables and of the learned baseline's,
    and with `diagnose` {term: gradients of the attention's variables}.
    """
    variables = self.model.trainable_variables
    head_variables = self.baseline_head.trainable_variables if self.baseline_head else []
    samples = self.config.reinforce_samples if self.hard_attention else 1
    if samples > 1:  # each sentence N times in a row: [b * N, ...]
      batch = {key: tf.repeat(batch[key], samples, axis=0)
               for key in ("source", "target_in", "target_out")}
    extra = {}
    if self.hard_attention and self.config.reinforce_start:
      # Before train.reinforce_start every sentence takes the expected context (no sample).
      extra["expectation_rate"] = tf.where(
          self.optimizer.iterations < self.config.reinforce_start, 1.0,
          self.model.model_config.hard_expectation_rate)
    with tf.GradientTape(persistent=diagnose) as tape:
      outputs = self.model({"source": batch["source"], "target_in": batch["target_in"]},
                           training=True, samples=samples, **extra)
      loss_sum, _ = losses.token_loss_sum(outputs["logits"], batch["target_out"],
                                          self.config.label_smoothing, self.smoothing_labels)
      loss_sum = loss_sum / samples  # the mean over the N samples of each sentence
      likelihood = loss = loss_sum / global_tokens
      stats, parts = {}, {}
      if self.hard_attention:
        parts, stats = reinforce.terms(self.config, outputs, batch["target_out"], baseline,
                                       scale, samples, self.baseline_head)
        rows = tf.cast(tf.shape(batch["target_out"])[0], tf.float32)
        share = rows / samples / global_sentences
        parts = {key: value * share for key, value in parts.items()}
        loss += parts["reinforce"] + parts["entropy"]
      scaled = self.optimizer.scale_loss(loss) if self.loss_scaled else loss
      # The fit reaches only the head's variables (its input is held constant).
      target = scaled + parts["baseline_fit"] if head_variables else scaled
    grads = tape.gradient(target, variables + head_variables)
    grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
             for g, v in zip(grads, variables + head_variables)]
    term_grads = {}
    if diagnose and self.hard_attention:
      attention = reinforce.attention_variables(self.model)
      for key, value in (("likelihood", likelihood), ("reinforce", parts["reinforce"]),
                         ("entropy", parts["entropy"])):
        term_grads[key] = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                           for g, v in zip(tape.gradient(value, attention), attention)]
      del tape
    return loss_sum, stats, grads[:len(variables)], grads[len(variables):], term_grads

  def _replica_step(self, batch, baseline, scale, diagnose):
    ctx = tf.distribute.get_replica_context()
    tokens = tf.reduce_sum(tf.cast(batch["target_out"] != special_tokens.PAD_ID, tf.float32))
    sentences = tf.cast(tf.shape(batch["target_out"])[0], tf.float32)
    global_tokens, global_sentences = ctx.all_reduce(SUM, [tokens, sentences])
    loss_sum, stats, grads, head_grads, term_grads = self._compute[diagnose](
        batch, tf.maximum(global_tokens, 1.0), tf.maximum(global_sentences, 1.0), baseline,
        scale)
    out = dict(stats)
    for key, value in term_grads.items():  # the norm of the global batch's gradient
      out[f"grad_norm_{key}"] = tf.linalg.global_norm(ctx.all_reduce(SUM, value))
    if head_grads:
      self.baseline_optimizer.apply(ctx.all_reduce(SUM, head_grads),
                                    self.baseline_head.trainable_variables)
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
    return {"loss_sum": loss_sum, "tokens": tokens, "sentences": sentences, "grad_norm": norm,
            **out}

  def _reward_scale(self):
    """max(1, sigma) of `train.reinforce_normalize`, else 1."""
    if self.reward_variance is None:
      return tf.constant(1.0)
    return tf.maximum(1.0, tf.sqrt(self.reward_variance.read_value()))

  def _step(self, batch, diagnose=False):
    lr = self.optimizer.learning_rate
    scale = self._reward_scale()
    per_replica = self.strategy.run(self._replica_step, args=(
        batch, self.baseline.read_value(), scale, diagnose))
    if self.weight_average is not None:
      self.weight_average.update()  # after the optimizer's update, in cross-replica context
    mean_keys = [k for k in per_replica if k == "grad_norm" or k.startswith("grad_norm_")]
    out = {k: self.strategy.reduce(SUM, v, axis=None)
           for k, v in per_replica.items() if k not in mean_keys}
    out.update({k: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica[k], axis=None)
                for k in mean_keys})
    out["loss"] = out["loss_sum"] / tf.maximum(out["tokens"], 1.0)
    out["learning_rate"] = tf.cast(lr, tf.float32)
    if self.hard_attention:
      first = self.baseline_steps <= 0
      decay = self.config.reinforce_baseline_decay
      average = lambda old, value: tf.where(first, value, decay * old + (1.0 - decay) * value)
      mean_reward = out["reward_sum"] / tf.maximum(out["sentences"], 1.0)
      self.baseline.assign(average(self.baseline, mean_reward))
      if self.reward_variance is not None:
        out["reward_scale"] = scale
        self.reward_variance.assign(average(
            self.reward_variance, out["raw_sq_sum"] / tf.maximum(out["decisions"], 1.0)))
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
