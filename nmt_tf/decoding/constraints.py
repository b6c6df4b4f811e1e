"""Length constraints shared by the searches: which token may be emitted at which step.

Conventions (shared by every search of this package):
  * `lengths` count EOS. `max_length` (a static python int) is the size of the output buffer
    and the maximum number of decoding steps: a hypothesis still alive at step
    `max_length - 1` is forced to emit EOS, so every hypothesis ends with EOS.
  * An optional per-sentence limit relative to the source length,
    `floor(max_length_a * src_length + max_length_b)` tokens (EOS included), clipped to
    [1, max_length], is enforced the same way.
  * `min_length` counts the tokens before EOS (EOS excluded, as in OpenNMT-tf): EOS is
    forbidden at steps `time < min_length`. A per-sentence maximum wins over `min_length`.
  * PAD is never emitted: it marks the positions after EOS. Nor is BOS: it only starts the
    target, and detokenization would drop it.
"""

import tensorflow as tf

from nmt_tf.special_tokens import BOS_ID, EOS_ID, PAD_ID


def validate_search_args(max_length, min_length, src_length, max_length_a, max_length_b,
                         length_penalty, coverage_penalty):
  """Checks the python-level arguments common to all searches.

  Raises:
    ValueError: with the received and expected values.
  """
  if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
    raise ValueError(f"Received max_length={max_length!r}; expected a positive python int "
                     "(the static size of the output buffer).")
  if not isinstance(min_length, int) or min_length < 0 or min_length >= max_length:
    raise ValueError(f"Received min_length={min_length!r}; expected an int in "
                     f"[0, max_length - 1] = [0, {max_length - 1}] (EOS excluded).")
  if max_length_a is not None:
    if src_length is None:
      raise ValueError(f"Received max_length_a={max_length_a!r} but src_length=None; "
                       "a length relative to the source needs src_length.")
    if max_length_a < 0:
      raise ValueError(f"Received max_length_a={max_length_a!r}; expected a number >= 0.")
  elif max_length_b:
    raise ValueError(f"Received max_length_b={max_length_b!r} with max_length_a=None; "
                     "expected max_length_a to be set too (use max_length for a fixed limit).")
  if length_penalty < 0:
    raise ValueError(f"Received length_penalty={length_penalty!r}; expected alpha >= 0.")
  if coverage_penalty < 0:
    raise ValueError(f"Received coverage_penalty={coverage_penalty!r}; expected beta >= 0.")


def sentence_max_lengths(batch_size, max_length, src_length=None, max_length_a=None,
                         max_length_b=0.0):
  """Per-sentence maximum number of tokens, EOS included.

  Args:
    batch_size: python int or scalar int32 tensor.
    max_length: static python int, the global limit.
    src_length: optional int [batch] source lengths.
    max_length_a: optional float; None disables the relative limit.
    max_length_b: float offset of the relative limit.

  Returns:
    int32 [batch]: min(max_length, floor(a * src_length + b)), at least 1.
  """
  limits = tf.fill([batch_size], max_length)  # [batch]
  if max_length_a is None:
    return limits
  relative = tf.floor(max_length_a * tf.cast(src_length, tf.float32) + max_length_b)
  relative = tf.cast(tf.clip_by_value(relative, 1.0, float(max_length)), tf.int32)  # [batch]
  return tf.minimum(limits, relative)


def step_log_probs(logits, time, min_length, max_lengths):
  """Log-probabilities of the next token with the length constraints applied.

  Disallowed tokens get -inf; allowed ones keep the model's log-probability (no
  renormalization), so summed log-probabilities stay those of the model.

  Args:
    logits: float [rows, vocab] (any float dtype, e.g. bfloat16 under mixed precision).
    time: scalar int32, the current step (0 for the first token).
    min_length: python int: EOS forbidden while time < min_length.
    max_lengths: int32 [rows]: EOS forced when time >= max_lengths - 1.

  Returns:
    float32 [rows, vocab].
  """
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # [rows, vocab]
  vocab = tf.range(tf.shape(log_probs)[-1])  # [vocab]
  is_eos = tf.equal(vocab, EOS_ID)[tf.newaxis, :]  # [1, vocab]
  neg_inf = tf.constant(-float("inf"), tf.float32)
  # PAD and BOS are never outputs (BOS only starts the target); an emitted BOS would also be
  # dropped by detokenization, so the text would no longer match its score.
  forbidden = tf.logical_or(tf.equal(vocab, PAD_ID), tf.equal(vocab, BOS_ID))[tf.newaxis, :]
  if min_length > 0:
    forbidden = tf.logical_or(forbidden, tf.logical_and(is_eos, time < min_length))
  forced = tf.greater_equal(time, max_lengths - 1)[:, tf.newaxis]  # [rows, 1]
  forbidden = tf.logical_or(tf.logical_and(forbidden, tf.logical_not(forced)),
                            tf.logical_and(forced, tf.logical_not(is_eos)))  # [rows, vocab]
  return tf.where(forbidden, neg_inf, log_probs)
