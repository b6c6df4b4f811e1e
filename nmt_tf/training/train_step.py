"""The distributed training step and the validation loss step, as tf.functions.

Each replica runs `nmt_tf.models.update.replica_update`, the update that `Seq2Seq.train_step`
(Keras' `fit`) also runs (its equations are there); this step adds what a run needs around
it: the strategy, the objective's step inputs and moving averages (`after_step`), the weight
average, the reduction of the replicas' statistics, an XLA-compiled gradient computation
(`train.jit_compile`), and every `log_every` steps, for an objective with terms
(`diagnoses`), the norm of each term's gradient on the attention's weights (`diagnose=True`;
the update is the same).
"""

import dataclasses
import functools

import tensorflow as tf

from nmt_tf.models import losses
from nmt_tf.models import update
from nmt_tf.training import objectives, reinforce

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
    options = getattr(model, "kernel_options", None)
    if train_config.jit_compile and options is not None and options.compiled_cell != "off":
      # XLA compiles stock ops only: the XLA-compiled step takes the GRU steps' plain ops.
      model.kernel_options = dataclasses.replace(options, compiled_cell="off")
    compute = lambda diagnose: functools.partial(  # pylint: disable=g-long-lambda
        update.compute_gradients, model, optimizer, self.objective,
        term_variables=reinforce.attention_variables(model) if diagnose else None)
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

  def _replica_step(self, batch, inputs, diagnose):
    return update.replica_update(self.model, self.optimizer, self.objective, batch, inputs,
                                 self.config.clip_norm, compute=self._compute[diagnose])

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
