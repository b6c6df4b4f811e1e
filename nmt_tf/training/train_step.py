"""The distributed training step and the validation loss step, as tf.functions.

Per replica r with batch B_r (docs/EQUATIONS.md, "Training objective"):
  N = sum_r #real target tokens of B_r   (all-reduced before the forward pass)
  L_r = the objective's loss of B_r      (objectives.py: sum CE / N [+ REINFORCE terms])
  g = sum_r grad L_r                     (all-reduced), |g| its global norm,
  g <- g * min(1, clip_norm / |g|)       (Pascanu et al. 2013), then Adam.
so the update is that of the mean token loss of the global batch whatever the replica count.
The objective owns what else a step reads and updates (hard attention's baselines); the step
knows only its interface. Every `log_every` steps an objective with terms (`diagnoses`) also
has the norm of each term's gradient on the attention's weights measured (`diagnose=True`;
the update is the same).
"""

import dataclasses
import functools

import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.training import losses, objectives, reinforce

SUM = tf.distribute.ReduceOp.SUM


class TrainStep:
  """Builds `__call__(distributed_batch) -> dict` of host-side scalars for one update.

  Args:
    model: Seq2Seq (built, created under the strategy's scope).
    optimizer: keras Adam, or a LossScaleOptimizer around it (mixed_float16).
    strategy: the tf.distribute.Strategy.
    train_config: TrainConfig (clip_norm, jit_compile).
    objective: what the step minimises (objectives.py); default the cross-entropy with
      train_config.label_smoothing.
    weight_average: a weight_average.WeightAverage of the model's trainable variables,
      updated after each step, or None.
  """

  def __init__(self, model, optimizer, strategy, train_config, objective=None,
               weight_average=None):
    self.model = model
    self.optimizer = optimizer
    self.strategy = strategy
    self.config = train_config
    self.objective = objective or objectives.CrossEntropy(train_config.label_smoothing)
    self.weight_average = weight_average
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
    """One update; with `diagnose` and an objective with terms, also the gradient norm of
    each term on the attention's weights (`grad_norm_<term>`)."""
    if diagnose and self.objective.diagnoses:
      return self.diagnosing_function(batch)
    return self.function(batch)

  def trace(self, batch_spec):
    """Traces the step for `batch_spec` (the training dataset's element_spec, whose batch and
    length dimensions are unknown), which every later batch then reuses: without it, the
    first batch's shapes are traced, and the second batch of another shape traces again."""
    self.function.get_concrete_function(batch_spec)
    if self.objective.diagnoses:
      self.diagnosing_function.get_concrete_function(batch_spec)

  def _compute_gradients(self, batch, global_tokens, global_sentences, inputs, diagnose=False):
    """Forward and backward pass of one replica (no collective: can be XLA-compiled).

    Args:
      inputs: the objective's step_inputs().

    Returns (loss_sum, stats, grads, head_grads, term_grads): the token loss summed over the
    batch (a mean over samples), the objective's statistics, the gradients of the model's
    variables and of the objective's head, and with `diagnose` {term: gradients of the
    attention's variables}.
    """
    objective = self.objective
    variables = self.model.trainable_variables
    head_variables = objective.head_variables
    samples = objective.samples
    if samples > 1:  # each sentence N times in a row: [b * N, ...]
      batch = {key: tf.repeat(batch[key], samples, axis=0)
               for key in ("source", "target_in", "target_out")}
    with tf.GradientTape(persistent=diagnose) as tape:
      outputs = self.model({"source": batch["source"], "target_in": batch["target_in"]},
                           training=True, samples=samples,
                           **objective.model_arguments(self.optimizer))
      loss = objective.loss(outputs, batch, global_tokens, global_sentences, inputs)
      scaled = self.optimizer.scale_loss(loss.total) if self.loss_scaled else loss.total
      # The fit reaches only the head's variables (its input is held constant).
      target = scaled + loss.fit if head_variables else scaled
    grads = _dense(tape.gradient(target, variables + head_variables), variables + head_variables)
    term_grads = {}
    if diagnose and loss.terms:
      attention = reinforce.attention_variables(self.model)
      for key, value in loss.terms.items():
        term_grads[key] = _dense(tape.gradient(value, attention), attention)
      del tape
    return (loss.loss_sum, loss.stats, grads[:len(variables)], grads[len(variables):],
            term_grads)

  def _replica_step(self, batch, inputs, diagnose):
    ctx = tf.distribute.get_replica_context()
    tokens = tf.reduce_sum(tf.cast(batch["target_out"] != special_tokens.PAD_ID, tf.float32))
    sentences = tf.cast(tf.shape(batch["target_out"])[0], tf.float32)
    global_tokens, global_sentences = ctx.all_reduce(SUM, [tokens, sentences])
    loss_sum, stats, grads, head_grads, term_grads = self._compute[diagnose](
        batch, tf.maximum(global_tokens, 1.0), tf.maximum(global_sentences, 1.0), inputs)
    out = dict(stats)
    for key, value in term_grads.items():  # the norm of the global batch's gradient
      out[f"grad_norm_{key}"] = tf.linalg.global_norm(ctx.all_reduce(SUM, value))
    if head_grads:
      self.objective.apply_head(ctx, head_grads)
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

  def _step(self, batch, diagnose=False):
    lr = self.optimizer.learning_rate
    inputs = self.objective.step_inputs()
    per_replica = self.strategy.run(self._replica_step, args=(batch, inputs, diagnose))
    if self.weight_average is not None:
      self.weight_average.update()  # after the optimizer's update, in cross-replica context
    mean_keys = [k for k in per_replica if k == "grad_norm" or k.startswith("grad_norm_")]
    out = {k: self.strategy.reduce(SUM, v, axis=None)
           for k, v in per_replica.items() if k not in mean_keys}
    out.update({k: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica[k], axis=None)
                for k in mean_keys})
    out["loss"] = out["loss_sum"] / tf.maximum(out["tokens"], 1.0)
    out["learning_rate"] = tf.cast(lr, tf.float32)
    return self.objective.after_step(out, inputs)


def _dense(grads, variables):
  """The gradients as dense tensors, zeros for a variable the loss does not reach."""
  return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
          for g, v in zip(grads, variables)]


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
