"""Greedy search: the arg-max token at every step."""

import tensorflow as tf

from nmt_tf.decoding import constraints
from nmt_tf.decoding import penalties
from nmt_tf.decoding import utils
from nmt_tf.decoding.result import DecodeResult
from nmt_tf.special_tokens import BOS_ID, EOS_ID, PAD_ID


def greedy_search(step_fn, state, context, batch_size, max_length, src_length=None, *,
                  max_length_a=None, max_length_b=0.0, min_length=0, length_penalty=0.0,
                  coverage_penalty=0.0):
  """Decodes by taking the most probable token at each step.

  Runs eagerly, inside `tf.function` and under `tf.function(jit_compile=True)`: shapes are
  static, outputs are preallocated buffers written by index and the loop is a
  `tf.while_loop` bounded by `max_length` that exits early once every sentence has emitted
  EOS. Length conventions are those of `constraints.py` (lengths count EOS). The penalties do
  not change the greedy choice; they only define the returned `scores`.

  Args:
    step_fn: `step_fn(ids, state, context, time) -> (logits, attention, new_state)` with
      ids int32 [batch], logits [batch, vocab], attention [batch, src_len].
    state: nested structure of tensors [batch, ...], updated by `step_fn`.
    context: nested structure of tensors [batch, ...], constant while decoding.
    batch_size: python int or scalar int32 tensor.
    max_length: static python int: maximum number of tokens, EOS included.
    src_length: optional int32 [batch] source lengths (for `max_length_a` and to mask
      padding in the coverage penalty).
    max_length_a: optional float: per-sentence limit `a * src_length + b` (EOS included).
    max_length_b: float offset of the per-sentence limit.
    min_length: python int: minimum number of tokens before EOS.
    length_penalty: GNMT alpha for the returned scores.
    coverage_penalty: GNMT beta for the returned scores.

  Returns:
    A `DecodeResult` with nbest = 1.

  Raises:
    ValueError: on invalid python arguments.
  """
  constraints.validate_search_args(max_length, min_length, src_length, max_length_a,
                                   max_length_b, length_penalty, coverage_penalty)
  max_lengths = constraints.sentence_max_lengths(
      batch_size, max_length, src_length, max_length_a, max_length_b)  # [batch]

  def advance(time, logits, attention, new_state, loop):
    """Chooses the tokens of step `time` and writes them into the buffers."""
    ids, attn_buffer, log_probs, lengths, finished = loop["outputs"]
    scores = constraints.step_log_probs(logits, time, min_length, max_lengths)  # [b, vocab]
    tokens = tf.argmax(scores, axis=-1, output_type=tf.int32)  # [batch]
    token_log_probs = tf.gather(scores, tokens, batch_dims=1)  # [batch]
    attention = tf.cast(attention, tf.float32)  # [batch, src_len]
    tokens = tf.where(finished, PAD_ID, tokens)
    token_log_probs = tf.where(finished, 0.0, token_log_probs)
    attention = tf.where(finished[:, tf.newaxis], 0.0, attention)
    ended = tf.logical_and(tf.logical_not(finished), tf.equal(tokens, EOS_ID))  # [batch]
    outputs = (utils.write_at(ids, time, tokens),  # [batch, max_length]
               utils.write_at(attn_buffer, time, attention),  # [batch, max_length, src_len]
               log_probs + token_log_probs,
               tf.where(ended, time + 1, lengths),
               tf.logical_or(finished, ended))
    return {"time": time + 1, "tokens": tokens, "state": new_state, "outputs": outputs}

  # The first step is taken before the loop: it reveals src_len, needed to allocate the
  # attention buffer, without asking the caller for it.
  time = tf.constant(0, tf.int32)
  bos = tf.fill([batch_size], BOS_ID)  # [batch]
  logits, attention, new_state = step_fn(bos, state, context, time)
  src_len = tf.shape(attention)[-1]
  outputs = (tf.zeros([batch_size, max_length], tf.int32),
             tf.zeros([batch_size, max_length, src_len], tf.float32),
             tf.zeros([batch_size], tf.float32),
             tf.zeros([batch_size], tf.int32),
             tf.zeros([batch_size], tf.bool))
  loop = advance(time, logits, attention, new_state, {"outputs": outputs})

  def cond(loop):
    return tf.logical_not(tf.reduce_all(loop["outputs"][-1]))

  def body(loop):
    logits, attention, new_state = step_fn(loop["tokens"], loop["state"], context,
                                           loop["time"])
    return (utils.keep_shapes(advance(loop["time"], logits, attention, new_state, loop), loop),)

  (loop,) = tf.while_loop(cond, body, (loop,), maximum_iterations=max_length - 1)
  ids, attn_buffer, log_probs, lengths, _ = loop["outputs"]
  attn_sum = tf.reduce_sum(attn_buffer, axis=1)  # [batch, src_len]
  scores = penalties.hypothesis_scores(
      log_probs, lengths, attn_sum, length_penalty, coverage_penalty,
      utils.source_mask(src_length, src_len))  # [batch]
  return DecodeResult(ids=ids[:, tf.newaxis],  # [batch, 1, max_length]
                      lengths=lengths[:, tf.newaxis],  # [batch, 1]
                      log_probs=log_probs[:, tf.newaxis],  # [batch, 1]
                      scores=scores[:, tf.newaxis],  # [batch, 1]
                      attention=attn_buffer[:, tf.newaxis])  # [batch, 1, max_length, src_len]
