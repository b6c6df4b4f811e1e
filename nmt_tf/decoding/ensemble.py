"""Ensembles of models seen through their step functions."""

import math

import tensorflow as tf

_AVERAGES = ("log_probs", "probs")


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

  def step_fn(ids, state, context, time):
    if len(state) != num_models or len(context) != num_models:
      raise ValueError(f"Received {len(state)} states and {len(context)} contexts; expected "
                       f"one per model ({num_models}).")
    log_probs, attentions, new_states = [], [], []
    for member_fn, member_state, member_context in zip(step_fns, state, context):
      logits, attention, new_state = member_fn(ids, member_state, member_context, time)
      log_probs.append(tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1))
      attentions.append(tf.cast(attention, tf.float32))
      new_states.append(new_state)
    log_probs = tf.stack(log_probs)  # [models, batch, vocab]
    if average == "log_probs":
      combined = tf.nn.log_softmax(tf.reduce_mean(log_probs, axis=0), axis=-1)
    else:
      combined = tf.reduce_logsumexp(log_probs, axis=0) - math.log(num_models)
    attention = tf.reduce_mean(tf.stack(attentions), axis=0)  # [batch, src_len]
    return combined, attention, tuple(new_states)  # [batch, vocab]

  return step_fn
