"""Greedy search: the arg-max token at every step."""

import tensorflow as tf

from nmt_tf.decoding import constraints
from nmt_tf.decoding import penalties
from nmt_tf.decoding import prefix as prefix_lib
from nmt_tf.decoding import utils
from nmt_tf.decoding.result import DecodeResult
from nmt_tf.special_tokens import BOS_ID, EOS_ID, PAD_ID


def greedy_search(step_fn, state, context, batch_size, max_length, src_length=None, *,
                  max_length_a=None, max_length_b=0.0, min_length=0, length_penalty=0.0,
                  coverage_penalty=0.0, compact=False, prefix=None):
  """Decodes by taking the most probable token at each step.

  Runs eagerly, inside `tf.function` and, with `compact=False`, under
  `tf.function(jit_compile=True)`: shapes are static, outputs are preallocated buffers
  written by index and the loop is a `tf.while_loop` bounded by `max_length` that exits
  early once every sentence has emitted EOS. Length conventions are those of
  `constraints.py` (lengths count EOS). The penalties do not change the greedy choice; they
  only define the returned `scores`.

  With `compact=True` the finished sentences leave the batch (as fairseq's generator drops
  finalized sentences): the steps run on the sentences still decoding, gathered from `state`
  and `context` after every step in which one emitted EOS, and their outputs are scattered
  into the buffers by sentence index. The result is the same; the
  steps' batch shrinks, so sentences of unequal lengths cost less. The batch dimension is no
  longer static: not for XLA or LiteRT.

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
    compact: python bool: drop finished sentences from the steps' batch.
    prefix: optional `prefix.Prefix` [batch, ...]: the forced start of each translation.

  Returns:
    A `DecodeResult` with nbest = 1.

  Raises:
    ValueError: on invalid python arguments.
  """
  constraints.validate_search_args(max_length, min_length, src_length, max_length_a,
                                   max_length_b, length_penalty, coverage_penalty)
  max_lengths = constraints.sentence_max_lengths(
      batch_size, max_length, src_length, max_length_a, max_length_b)  # [batch]
  if prefix is not None:
    max_lengths = prefix_lib.max_lengths(max_lengths, prefix, max_length)

  # The loop's "active" entries have one row per sentence still in the steps' batch (every
  # sentence unless `compact`); "rows" maps them to the sentences. The buffers are per sentence.
  def advance(time, logits, attention, new_state, loop):
    """Chooses the tokens of step `time` and writes them into the buffers."""
    active, (ids, attn_buffer, lp_buffer) = loop["active"], loop["buffers"]
    finished = active["finished"]  # [active]
    scores = constraints.step_log_probs(logits, time, min_length, active["max_lengths"])
    if "prefix" in active:
      scores = prefix_lib.restrict(scores, time, active["prefix"], active.get("completion"),
                                   active["max_lengths"])
    tokens = tf.argmax(scores, axis=-1, output_type=tf.int32)  # [active]
    token_log_probs = tf.gather(scores, tokens, batch_dims=1)  # [active]
    attention = tf.cast(attention, tf.float32)  # [active, src_len]
    tokens = tf.where(finished, PAD_ID, tokens)
    token_log_probs = tf.where(finished, 0.0, token_log_probs)
    attention = tf.where(finished[:, tf.newaxis], 0.0, attention)
    ended = tf.logical_and(tf.logical_not(finished), tf.equal(tokens, EOS_ID))  # [active]
    rows = active["rows"] if compact else None
    if "prefix" in active:
      active = dict(active, prefix=prefix_lib.advance(active["prefix"], time, tokens,
                                                      prefix.piece_bytes))
    active = dict(active, tokens=tokens, state=new_state,
                  log_probs=active["log_probs"] + token_log_probs,
                  lengths=tf.where(ended, time + 1, active["lengths"]),
                  finished=tf.logical_or(finished, ended))
    buffers = (utils.write_at(ids, time, tokens, rows),  # [batch, max_length]
               utils.write_at(attn_buffer, time, attention, rows),  # [batch, max_length, src]
               utils.write_at(lp_buffer, time, token_log_probs, rows))  # [batch, max_length]
    return dict(loop, time=time + 1, active=active, buffers=buffers)

  bos = tf.fill([batch_size], BOS_ID)  # [batch]

  def start(attention):  # the loop variables, once step 0 gave src_len
    active = {"tokens": bos, "state": state, "context": context, "max_lengths": max_lengths,
              "log_probs": tf.zeros([batch_size], tf.float32),
              "lengths": tf.zeros([batch_size], tf.int32),
              "finished": tf.zeros([batch_size], tf.bool)}
    if prefix is not None:
      active["prefix"], completion = prefix_lib.start(prefix)
      if completion is not None:
        active["completion"] = completion  # [batch, stem_len, vocab]
    loop = {"active": active,
            "buffers": (tf.zeros([batch_size, max_length], tf.int32),
                        tf.zeros([batch_size, max_length, tf.shape(attention)[-1]],
                                 tf.float32),
                        tf.zeros([batch_size, max_length], tf.float32))}
    if compact:
      active["rows"] = tf.range(batch_size)  # the batch row of each active sentence
      # log_probs and lengths of the sentences that left the batch, per sentence.
      loop["left"] = (tf.zeros([batch_size], tf.float32), tf.zeros([batch_size], tf.int32))
    return loop

  loop = utils.search_loop(step_fn, bos, state, context, start, advance,
                           lambda loop: tf.reduce_all(loop["active"]["finished"]), max_length,
                           _compact if compact else None)
  ids, attn_buffer, lp_buffer = loop["buffers"]
  src_len = tf.shape(attn_buffer)[-1]
  if compact:
    log_probs, lengths = _gather_results(loop)  # [batch] each
  else:  # every sentence stayed in place (no scatter: LiteRT lowers the loop to builtins)
    log_probs, lengths = loop["active"]["log_probs"], loop["active"]["lengths"]
  attn_sum = tf.reduce_sum(attn_buffer, axis=1)  # [batch, src_len]
  scores = penalties.hypothesis_scores(
      log_probs, lengths, attn_sum, length_penalty, coverage_penalty,
      utils.source_mask(src_length, src_len))  # [batch]
  return DecodeResult(ids=ids[:, tf.newaxis],  # [batch, 1, max_length]
                      lengths=lengths[:, tf.newaxis],  # [batch, 1]
                      log_probs=log_probs[:, tf.newaxis],  # [batch, 1]
                      scores=scores[:, tf.newaxis],  # [batch, 1]
                      attention=attn_buffer[:, tf.newaxis],  # [batch, 1, max_length, src_len]
                      token_log_probs=lp_buffer[:, tf.newaxis])  # [batch, 1, max_length]


def _gather_results(loop):
  """(log_probs [batch], lengths [batch]): the values of the sentences that left the batch,
  with those of the sentences still in it scattered over them."""
  active = loop["active"]
  at = active["rows"][:, tf.newaxis]  # [active, 1]
  left_log_probs, left_lengths = loop["left"]
  return (tf.tensor_scatter_nd_update(left_log_probs, at, active["log_probs"]),
          tf.tensor_scatter_nd_update(left_lengths, at, active["lengths"]))


def _compact(loop):
  """The loop with its finished sentences removed from the active entries, if any finished;
  their log_probs and lengths move to "left". Compacting after every step that ends a
  sentence costs a copy of the context each time; it decodes faster than keeping every
  sentence to the end (bench/bench_decode.py --compact false,true)."""
  finished = loop["active"]["finished"]  # [active]

  def drop():
    keep = tf.where(tf.logical_not(finished))[:, 0]  # [kept] int64
    kept = utils.gather_rows(loop["active"], keep)
    return dict(loop, active=kept, left=_gather_results(loop))

  return tf.cond(tf.reduce_any(finished), drop, lambda: loop)
