"""Several models decoded as one: the mean of their log-probabilities at every step.

`ModelEnsemble` has the `encode` / `initial_state` / `step` interface of `Seq2Seq`
(docs/DESIGN.md), so `Translator` and the searches use it like a single model: contexts and
states are tuples with one entry per member, and `step` is
`nmt_tf.decoding.ensemble_step_fn`, i.e. log p(y_t) = log_softmax(mean_m log p_m(y_t))
(a normalized geometric mean, Sennrich et al. 2016 "Edinburgh NMT systems for WMT16").
"""

import tensorflow as tf

from nmt_tf.decoding import ensemble_step_fn


class ModelEnsemble(tf.Module):
  """Decodes with several models that share the source and target vocabularies.

  Args:
    models: sequence of Seq2Seq (anything with encode, initial_state, step and __call__).
    average: "log_probs" (default) or "probs", see `ensemble_step_fn`.

  Raises:
    ValueError: if `models` is empty or the members' vocabulary sizes differ.
  """

  def __init__(self, models, average="log_probs", name=None):
    super().__init__(name=name)
    self.models = list(models)
    if not self.models:
      raise ValueError("Received no models; expected at least one checkpoint in the ensemble.")
    sizes = {(m.model_config.src_vocab_size, m.model_config.tgt_vocab_size)
             for m in self.models if hasattr(m, "model_config")}
    if len(sizes) > 1:
      raise ValueError(f"Received ensemble members with different (source, target) vocabulary "
                       f"sizes {sorted(sizes)}; expected checkpoints of runs that share "
                       "their vocabularies.")
    self.average = average
    self._step = ensemble_step_fn([m.step for m in self.models], average=average)

  @property
  def trainable_variables(self):
    """The members' weights (tf.Module does not look into Keras models), e.g. for the casts
    that `precision.scope(prefetch=...)` makes before a search loop."""
    return [v for m in self.models for v in m.trainable_variables]

  def encode(self, source, training=False):
    """source [batch, src_len] -> tuple of the members' contexts."""
    return tuple(m.encode(source, training=training) for m in self.models)

  def initial_state(self, context, max_length):
    return tuple(m.initial_state(c, max_length) for m, c in zip(self.models, context))

  def step(self, prev_ids, state, context, time):
    """(log_probs [batch, vocab], mean attention [batch, src_len], tuple of states)."""
    return self._step(prev_ids, state, context, time)

  def __call__(self, inputs, training=False):
    """Teacher-forced pass: logits are the combined log-probabilities [batch, tgt_len, vocab],
    attention the members' mean."""
    outputs = [m(inputs, training=training) for m in self.models]
    log_probs = tf.stack([tf.nn.log_softmax(tf.cast(o["logits"], tf.float32))
                          for o in outputs])  # [models, batch, tgt_len, vocab]
    if self.average == "log_probs":
      combined = tf.nn.log_softmax(tf.reduce_mean(log_probs, axis=0))
    else:
      combined = tf.reduce_logsumexp(log_probs, axis=0) - tf.math.log(
          float(len(self.models)))
    attention = tf.reduce_mean(tf.stack([tf.cast(o["attention"], tf.float32)
                                         for o in outputs]), axis=0)  # [b, tgt, src]
    return {"logits": combined, "attention": attention}
