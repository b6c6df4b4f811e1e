"""Several models decoded as one: the mean of their log-probabilities at every step.

`ensemble_step_fn` combines the members' step functions; `ModelEnsemble` has the
`encode` / `initial_state` / `step` / `__call__` interface of `Seq2Seq` (docs/DESIGN.md), so
`Translator`, its forced scoring and the searches use it like a single model: contexts and
states are tuples with one entry per member, and at every step
log p(y_t) = log_softmax(mean_m log p_m(y_t)) (a normalized geometric mean, Sennrich et al.
2016 "Edinburgh NMT systems for WMT16"), or log(mean_m p_m(y_t)) with average="probs".
"""

import math

import tensorflow as tf

_AVERAGES = ("log_probs", "probs")


def combine_log_probs(log_probs, average="log_probs"):
  """The members' log-probabilities [models, ..., vocab] -> the ensemble's [..., vocab]:
  log_softmax(mean_m log p_m) ("log_probs") or log(mean_m p_m) ("probs")."""
  if average == "log_probs":
    return tf.nn.log_softmax(tf.reduce_mean(log_probs, axis=0), axis=-1)
  return tf.reduce_logsumexp(log_probs, axis=0) - math.log(int(log_probs.shape[0]))


def ensemble_step_fn(step_fns, average="log_probs"):
  """Combines the step functions of several models into one step function.

  The combined function takes tuples `state = (state_1, ..., state_n)` and
  `context = (context_1, ..., context_n)` (one entry per member, each with the batch as
  leading dim, so the searches tile and reorder them like any nested structure) and returns
  normalized log-probabilities as its logits: the searches' log_softmax is then a no-op and
  needs no special case. The attention returned is the members' mean.

  Args:
    step_fns: sequence of `step_fn(ids, state, context, time) -> (logits, attention,
      new_state)`, one per member.
    average: "log_probs" (default) averages the members' log-probabilities, i.e. a
      normalized geometric mean of their distributions:
      log p(y) = log_softmax(mean_m log p_m(y)); "probs" averages the probabilities:
      log p(y) = log(mean_m p_m(y)).

  Returns:
    A step function `(ids, states, contexts, time) -> (log_probs float32 [batch, vocab],
    attention float32 [batch, src_len], new_states tuple)`.

  Raises:
    ValueError: if `step_fns` is empty or holds a non-callable, or `average` is unknown.
  """
  step_fns = tuple(step_fns)
  if not step_fns or not all(callable(fn) for fn in step_fns):
    raise ValueError(f"Received step_fns={step_fns!r}; expected a non-empty sequence of "
                     "callables.")
  if average not in _AVERAGES:
    raise ValueError(f"Received average={average!r}; expected one of {_AVERAGES}.")
  num_models = len(step_fns)

  def step_fn(ids, state, context, time, vocab=None):
    if len(state) != num_models or len(context) != num_models:
      raise ValueError(f"Received {len(state)} states and {len(context)} contexts; expected "
                       f"one per model ({num_models}).")
    log_probs, attentions, new_states = [], [], []
    shortlist = {} if vocab is None else {"vocab": vocab}
    for member_fn, member_state, member_context in zip(step_fns, state, context):
      logits, attention, new_state = member_fn(ids, member_state, member_context, time,
                                               **shortlist)
      log_probs.append(tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1))
      attentions.append(tf.cast(attention, tf.float32))
      new_states.append(new_state)
    combined = combine_log_probs(tf.stack(log_probs), average)  # [batch, vocab]
    attention = tf.reduce_mean(tf.stack(attentions), axis=0)  # [batch, src_len]
    return combined, attention, tuple(new_states)  # [batch, vocab]

  return step_fn


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
    that `kernels.precision_scope(prefetch=...)` makes before a search loop."""
    return [v for m in self.models for v in m.trainable_variables]

  def encode(self, source, training=False):
    """source [batch, src_len] -> tuple of the members' contexts."""
    return tuple(m.encode(source, training=training) for m in self.models)

  def initial_state(self, context, max_length):
    return tuple(m.initial_state(c, max_length) for m, c in zip(self.models, context))

  def step(self, prev_ids, state, context, time, vocab=None):
    """(log_probs [batch, vocab], mean attention [batch, src_len], tuple of states); with
    `vocab` (int32 [n], a shortlist), log-probabilities over those words only."""
    return self._step(prev_ids, state, context, time, vocab)

  def __call__(self, inputs, training=False):
    """Teacher-forced pass: logits are the combined log-probabilities [batch, tgt_len, vocab],
    attention the members' mean."""
    outputs = [m(inputs, training=training) for m in self.models]
    log_probs = tf.stack([tf.nn.log_softmax(tf.cast(o["logits"], tf.float32))
                          for o in outputs])  # [models, batch, tgt_len, vocab]
    combined = combine_log_probs(log_probs, self.average)  # [batch, tgt_len, vocab]
    attention = tf.reduce_mean(tf.stack([tf.cast(o["attention"], tf.float32)
                                         for o in outputs]), axis=0)  # [b, tgt, src]
    return {"logits": combined, "attention": attention}
