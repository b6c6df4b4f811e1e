"""One replica's training update: what `Seq2Seq.train_step` (Keras' `fit`) and the trainer's
distributed step (nmt_tf/training/train_step.py) both run, in a replica context.

Per replica r with batch B_r (docs/EQUATIONS.md, "Training objective"):
  N = sum_r #real target tokens of B_r   (all-reduced before the forward pass)
  L_r = the objective's loss of B_r      (objective.py: sum CE / N [+ REINFORCE terms])
  g = sum_r grad L_r                     (all-reduced), |g| its global norm,
  g <- g * min(1, clip_norm / |g|)       (Pascanu et al. 2013), then the optimizer.
so the update is that of the mean token loss of the global batch whatever the replica count.
"""

import tensorflow as tf

from nmt_tf import special_tokens

SUM = tf.distribute.ReduceOp.SUM


def loss_scaled(optimizer):
  """Whether `optimizer` is a LossScaleOptimizer (mixed_float16): the loss is scaled and the
  gradients' norm divided by its scale."""
  return hasattr(optimizer, "scale_loss") and hasattr(optimizer, "dynamic_scale")


def compute_gradients(model, optimizer, objective, batch, global_tokens, global_sentences,
                      inputs, term_variables=None):
  """Forward and backward pass of one replica (no collective: can be XLA-compiled).

  Args:
    batch: {"source", "target_in", "target_out"} of this replica.
    global_tokens, global_sentences: N and S of the global batch (at least 1).
    inputs: the objective's step_inputs().
    term_variables: with an objective that has terms (`loss.terms`), the variables whose
      gradient of each term is measured (the diagnosing step), or None.

  Returns (loss_sum, stats, grads, head_grads, term_grads): the token loss summed over the
  batch (a mean over samples), the objective's statistics, the gradients of the model's
  variables and of the objective's head, and {term: gradients of term_variables}.
  """
  variables = model.trainable_variables
  head_variables = objective.head_variables
  samples = objective.samples
  if samples > 1:  # each sentence N times in a row: [b * N, ...]
    batch = {key: tf.repeat(batch[key], samples, axis=0)
             for key in ("source", "target_in", "target_out")}
  diagnose = term_variables is not None
  with tf.GradientTape(persistent=diagnose) as tape:
    outputs = model({"source": batch["source"], "target_in": batch["target_in"]},
                    training=True, samples=samples, **objective.model_arguments(optimizer))
    loss = objective.loss(outputs, batch, global_tokens, global_sentences, inputs)
    scaled = optimizer.scale_loss(loss.total) if loss_scaled(optimizer) else loss.total
    # The fit reaches only the head's variables (its input is held constant).
    target = scaled + loss.fit if head_variables else scaled
  grads = _dense(tape.gradient(target, variables + head_variables), variables + head_variables)
  term_grads = {}
  if diagnose and loss.terms:
    for key, value in loss.terms.items():
      term_grads[key] = _dense(tape.gradient(value, term_variables), term_variables)
    del tape
  return (loss.loss_sum, loss.stats, grads[:len(variables)], grads[len(variables):],
          term_grads)


def replica_update(model, optimizer, objective, batch, inputs, clip_norm, compute=None,
                   term_variables=None):
  """One replica's share of a training update: the global batch's token count, the
  gradients (`compute`, default `compute_gradients`; the trainer may pass an XLA-compiled
  one), their all-reduce, clipping, and the optimizer's update.

  Returns {"loss_sum", "tokens", "sentences", "grad_norm"} of this replica (the norm is the
  global batch's), with the objective's statistics and, with `term_variables`,
  `grad_norm_<term>`.
  """
  ctx = tf.distribute.get_replica_context()
  tokens = tf.reduce_sum(tf.cast(batch["target_out"] != special_tokens.PAD_ID, tf.float32))
  sentences = tf.cast(tf.shape(batch["target_out"])[0], tf.float32)
  global_tokens, global_sentences = ctx.all_reduce(SUM, [tokens, sentences])
  if compute is None:
    compute = lambda *args: compute_gradients(  # pylint: disable=g-long-lambda
        model, optimizer, objective, *args, term_variables=term_variables)
  loss_sum, stats, grads, head_grads, term_grads = compute(
      batch, tf.maximum(global_tokens, 1.0), tf.maximum(global_sentences, 1.0), inputs)
  out = dict(stats)
  for key, value in term_grads.items():  # the norm of the global batch's gradient
    out[f"grad_norm_{key}"] = tf.linalg.global_norm(ctx.all_reduce(SUM, value))
  if head_grads:
    objective.apply_head(ctx, head_grads)
  grads = ctx.all_reduce(SUM, grads)  # the gradient of the global batch
  scale = tf.cast(optimizer.dynamic_scale, tf.float32) if loss_scaled(optimizer) else 1.0
  norm = tf.linalg.global_norm(grads) / scale
  # The optimizer all-reduces (sums) once more: hand it this replica's share. Clipping and
  # the share are one product, so the gradients are read and written once.
  factor = tf.constant(1.0 / ctx.num_replicas_in_sync)
  if clip_norm > 0:
    factor *= tf.minimum(1.0, clip_norm / tf.maximum(norm, 1e-12))
  grads = [g * factor for g in grads]
  optimizer.apply(grads, model.trainable_variables)
  return {"loss_sum": loss_sum, "tokens": tokens, "sentences": sentences, "grad_norm": norm,
          **out}


def _dense(grads, variables):
  """The gradients as dense tensors, zeros for a variable the loss does not reach."""
  return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
          for g, v in zip(grads, variables)]
