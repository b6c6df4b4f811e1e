"""Batched beam search with a buffer of finished hypotheses.

Beams are folded into the batch (row `b * beam_size + k`). Each step follows fairseq
(Ott et al., 2019) and KerasHub's beam sampler:
  1. the 2 * beam_size best continuations of the alive beams are chosen by log P(y | x);
  2. those ending with EOS that rank among the beam_size best are moved to the finished
     buffer with their final GNMT score (`penalties.py`); the buffer keeps the beam_size
     best by score;
  3. the beam_size best continuations not ending with EOS become the new alive beams, and
     the decoder state follows them (`tf.gather` on every state tensor).
A finished hypothesis therefore never competes for an alive slot and keeps its score. A
sentence stops when its buffer holds beam_size hypotheses (as in fairseq, so beam_size = 1
is greedy search), when no alive beam can still beat its nbest-th finished one (the bound
`log P / lp(max length)` is exact because log-probabilities and cp are <= 0), or at its
maximum length, where EOS is forced.

Two options change the steps: a target prefix forces each sentence's first tokens and
completes a word typed half-way (`prefix.py`); lexical constraints take the candidates of
step 1 from Post and Vilar's three sources, finish only hypotheses that meet every constraint
(until the maximum length) and choose the alive beams by dynamic beam allocation
(`lexical.py`).
"""

import functools

import tensorflow as tf

from nmt_tf.decoding import constraints
from nmt_tf.decoding import lexical
from nmt_tf.decoding import penalties
from nmt_tf.decoding import prefix as prefix_lib
from nmt_tf.decoding import utils
from nmt_tf.decoding.result import DecodeResult
from nmt_tf.special_tokens import BOS_ID, EOS_ID

_NEG_INF = -float("inf")
# Subtracted from the rank of a finished hypothesis that misses a constraint (it can only end
# at its maximum length): below that of any hypothesis that meets them all.
_UNMET = 1e9


def beam_search(step_fn, state, context, batch_size, beam_size, max_length, *,
                src_length=None, max_length_a=None, max_length_b=0.0, min_length=0,
                length_penalty=0.0, coverage_penalty=0.0, nbest=1, compact=False,
                prefix=None, lexical_constraints=None):
  """Decodes with beam search and returns the n best finished hypotheses.

  Runs eagerly, inside `tf.function` and, with `compact=False`, under
  `tf.function(jit_compile=True)` (static shapes, preallocated buffers written by index,
  `tf.while_loop` bounded by `max_length`, early exit when every sentence is done). Length
  conventions are those of `constraints.py`: lengths count EOS, `min_length` does not.

  Args:
    step_fn: `step_fn(ids, state, context, time) -> (logits, attention, new_state)` with
      ids int32 [rows], logits [rows, vocab], attention [rows, src_len].
    state: nested structure of tensors [batch, ...]; tiled by the beam once, then reordered
      with the beams after every step.
    context: nested structure of tensors [batch, ...]; tiled once, never reordered.
    batch_size: python int or scalar int32 tensor.
    beam_size: python int >= 1.
    max_length: static python int: maximum number of tokens, EOS included.
    src_length: optional int32 [batch] source lengths (for `max_length_a` and to mask
      padding in the coverage penalty).
    max_length_a: optional float: per-sentence limit `a * src_length + b` (EOS included).
    max_length_b: float offset of the per-sentence limit.
    min_length: python int: minimum number of tokens before EOS.
    length_penalty: GNMT alpha (0 = rank by log-probability).
    coverage_penalty: GNMT beta (0 = none).
    nbest: python int in [1, beam_size]: hypotheses returned per sentence.
    compact: python bool: drop done sentences and their beams from the steps' batch (see
      `greedy_search`), and end the prefix buffers at the batch's longest cap.
    prefix: optional `prefix.Prefix` [batch, ...]: the forced start of each translation.
    lexical_constraints: optional `lexical.Constraints` [batch, ...]: phrases each
      translation must contain (lexically constrained search, `lexical.py`).

  Returns:
    A `DecodeResult` with nbest hypotheses per sentence, sorted by score.

  Raises:
    ValueError: on invalid python arguments.
  """
  constraints.validate_search_args(max_length, min_length, src_length, max_length_a,
                                   max_length_b, length_penalty, coverage_penalty)
  if not isinstance(beam_size, int) or beam_size < 1:
    raise ValueError(f"Received beam_size={beam_size!r}; expected a positive python int.")
  if not isinstance(nbest, int) or not 1 <= nbest <= beam_size:
    raise ValueError(f"Received nbest={nbest!r}; expected an int in [1, beam_size] = "
                     f"[1, {beam_size}].")
  k = beam_size
  max_lengths = constraints.sentence_max_lengths(
      batch_size, max_length, src_length, max_length_a, max_length_b)  # [batch]
  if prefix is not None:
    max_lengths = prefix_lib.max_lengths(max_lengths, prefix, max_length)
  if lexical_constraints is not None:
    max_lengths = lexical.max_lengths(max_lengths, lexical_constraints, max_length)
  # The prefix buffers are copied at every step: without static shapes to keep, they end at
  # the batch's longest cap instead of max_length.
  length = tf.reduce_max(max_lengths) if compact else max_length

  advance = functools.partial(_advance, k=k, sentences=None if compact else batch_size,
                              length=length, min_length=min_length,
                              length_penalty=length_penalty,
                              coverage_penalty=coverage_penalty, nbest=nbest,
                              piece_bytes=None if prefix is None else prefix.piece_bytes)
  rows = batch_size * k
  state = utils.tile_beams(state, k)
  context = utils.tile_beams(context, k)

  def start(attention):  # the loop variables, once step 0 gave src_len
    src_len = tf.shape(attention)[-1]
    # Only beam 0 starts alive, so that the first step does not yield beam_size copies.
    first_beam = tf.tile(tf.one_hot(0, k, on_value=0.0, off_value=_NEG_INF), [batch_size])
    finished = (tf.zeros([batch_size, k, length], tf.int32),
                tf.zeros([batch_size, k, length, src_len], tf.float32),
                tf.zeros([batch_size, k, length], tf.float32),  # token log-probs
                tf.fill([batch_size, k], _NEG_INF),  # log-probs
                tf.zeros([batch_size, k], tf.int32),  # lengths
                tf.fill([batch_size, k], _NEG_INF))  # scores
    active = {
        # per beam row
        "tokens": tf.fill([rows], BOS_ID), "state": state, "context": context,
        "alive": (tf.zeros([rows, length], tf.int32),
                  tf.zeros([rows, length, src_len], tf.float32),
                  tf.zeros([rows, length], tf.float32),  # token log-probs
                  first_beam),  # [batch*beam]
        "row_max_lengths": tf.repeat(max_lengths, k),  # [batch*beam]
        # per sentence
        "finished": finished, "done": tf.zeros([batch_size], tf.bool),
        "max_lengths": max_lengths,
        "upper_lp": penalties.length_penalty(max_lengths, length_penalty),  # [batch]
        "sentences": tf.range(batch_size),
    }
    if src_length is not None:
      active["src_length"] = src_length
    if lexical_constraints is not None:
      active["constraints"] = lexical.start(lexical_constraints, k)  # per beam row
      active["finished_met"] = tf.zeros([batch_size, k], tf.bool)  # per sentence
    if prefix is not None:
      active["prefix"], completion = prefix_lib.start(prefix, k)  # per beam row
      if completion is not None:
        active["completion"] = completion  # per sentence [batch, stem_len, vocab]
    # The finished buffers of the sentences that left the batch, per sentence.
    return {"active": active, "left": finished}

  loop = utils.search_loop(step_fn, tf.fill([rows], BOS_ID), state, context, start, advance,
                           lambda loop: tf.reduce_all(loop["active"]["done"]), max_length,
                           (lambda loop: _compact(loop, k)) if compact else None)
  finished = _gather_finished(loop) if compact else loop["active"]["finished"]
  ids, attn, token_lps, log_probs, lengths, scores = (x[:, :nbest] for x in finished)
  if compact:  # back to the static max_length of the result
    pad = max_length - length
    ids = tf.pad(ids, [[0, 0], [0, 0], [0, pad]])  # [batch, nbest, max_length]
    token_lps = tf.pad(token_lps, [[0, 0], [0, 0], [0, pad]])  # [batch, nbest, max_length]
    attn = tf.pad(attn, [[0, 0], [0, 0], [0, pad], [0, 0]])  # [batch, nbest, T, src]
    ids.set_shape([None, None, max_length])
    token_lps.set_shape([None, None, max_length])
    attn.set_shape([None, None, max_length, None])
  found = scores > _NEG_INF  # [batch, nbest]
  return DecodeResult(
      ids=tf.where(found[:, :, tf.newaxis], ids, 0),  # [batch, nbest, max_length]
      lengths=tf.where(found, lengths, 0),  # [batch, nbest]
      log_probs=tf.where(found, log_probs, _NEG_INF),  # [batch, nbest]
      scores=scores,  # [batch, nbest]
      attention=tf.where(found[:, :, tf.newaxis, tf.newaxis], attn, 0.0),  # [b, n, T, src]
      token_log_probs=tf.where(found[:, :, tf.newaxis], token_lps, 0.0))  # [b, n, T]


# The loop's "active" entries cover the sentences still in the steps' batch (every sentence
# unless `compact`): per sentence ([n, ...]) or per beam row ([n * beam, ...]), with
# "sentences" mapping them to the sentences of the batch.
def _advance(time, logits, attention, new_state, loop, *, k, sentences, length, min_length,
             length_penalty, coverage_penalty, nbest, piece_bytes):
  """Extends the alive beams by one token (see the module docstring): the loop after step
  `time` from its logits [n*beam, vocab], attention [n*beam, src_len] and new state.
  `sentences` is n, the batch size, or None where compacting makes it change."""
  active = loop["active"]
  alive_ids, alive_attn, alive_token_lps, alive_log_probs = active["alive"]
  fin, done = active["finished"], active["done"]
  if sentences is None:
    sentences = tf.shape(done)[0]  # fewer once compacted
  row_offsets = (tf.range(sentences) * k)[:, tf.newaxis]  # [n, 1]
  log_probs = constraints.step_log_probs(logits, time, min_length,
                                         active["row_max_lengths"])  # [n*beam, vocab]
  if "prefix" in active:
    log_probs = prefix_lib.restrict(log_probs, time, active["prefix"], active.get("completion"),
                                    active["row_max_lengths"], k)
  constrained = "constraints" in active
  if constrained:
    log_probs = lexical.forbid_early_eos(log_probs, active["constraints"], time,
                                         active["row_max_lengths"])
  vocab = log_probs.shape[-1] if log_probs.shape[-1] is not None else tf.shape(log_probs)[-1]
  totals = alive_log_probs[:, tf.newaxis] + log_probs  # [n*beam, vocab]
  if constrained:  # candidates [n, m] of Post and Vilar's three sources
    cand_parents, cand_tokens, cand_scores = lexical.candidates(totals, active["constraints"],
                                                                sentences, k)
  else:
    cand_scores, cand_index = utils.top_k(tf.reshape(totals, [sentences, -1]), k=2 * k)
    cand_parents = row_offsets + cand_index // vocab  # [n, 2*beam] rows of n*beam
    cand_tokens = cand_index % vocab  # [n, 2*beam]
  cand_token_lps = tf.gather_nd(log_probs, tf.stack([cand_parents, cand_tokens], -1))
  cand_is_eos = tf.equal(cand_tokens, EOS_ID)
  attention = tf.cast(attention, tf.float32)  # [n*beam, src_len]

  def extend(parents, tokens, token_lps):
    """Prefix buffers of `parents` [n, m] extended with `tokens` [n, m] and their
    log-probabilities `token_lps` [n, m]."""
    rows = tf.reshape(parents, [-1])  # [n*m]
    ids = utils.write_at(tf.gather(alive_ids, rows), time, tf.reshape(tokens, [-1]))
    attn = utils.write_at(tf.gather(alive_attn, rows), time, tf.gather(attention, rows))
    lps = utils.write_at(tf.gather(alive_token_lps, rows), time, tf.reshape(token_lps, [-1]))
    return ids, attn, lps  # [n*m, length], [n*m, length, src_len], [n*m, length]

  # Finished: EOS continuations among the beam_size best candidates (constrained: among the
  # beam_size best of those with every constraint met, or of all at the maximum length).
  if constrained:
    m = tf.shape(cand_tokens)[1]
    met = lexical.advance(utils.gather_rows(active["constraints"],
                                            tf.reshape(cand_parents, [-1])),
                          tf.reshape(cand_tokens, [-1]))  # [n*m, ...] each candidate's
    complete = tf.reshape(lexical.all_met(met), [sentences, m])  # [n, m]
    at_end = (time >= active["max_lengths"] - 1)[:, tf.newaxis]  # [n, 1]
    eligible = tf.logical_or(complete, at_end)
    first = tf.math.top_k(tf.where(eligible, cand_scores, _NEG_INF), k=k)[1]  # [n, beam]
    pick = lambda x: tf.gather(x, first, batch_dims=1)  # pylint: disable=unnecessary-lambda-assignment
  else:
    pick = lambda x: x[:, :k]  # pylint: disable=unnecessary-lambda-assignment
  new_ids, new_attn, new_lps = extend(pick(cand_parents), pick(cand_tokens),
                                      pick(cand_token_lps))
  new_ids = tf.reshape(new_ids, [sentences, k, length])  # [n, beam, length]
  new_attn = tf.reshape(new_attn, [sentences, k, length, -1])  # [n, beam, T, src]
  new_lps = tf.reshape(new_lps, [sentences, k, length])  # [n, beam, length]
  new_log_probs = pick(cand_scores)  # [n, beam]
  new_lengths = tf.fill(tf.shape(new_log_probs), time + 1)  # [n, beam]
  src_mask = utils.source_mask(active.get("src_length"), tf.shape(attention)[-1])  # [n, src]
  new_scores = penalties.hypothesis_scores(
      new_log_probs, new_lengths, tf.reduce_sum(new_attn, axis=2), length_penalty,
      coverage_penalty, None if src_mask is None else src_mask[:, tf.newaxis])  # [n, beam]
  valid = tf.logical_and(pick(cand_is_eos), new_log_probs > _NEG_INF)
  valid = tf.logical_and(valid, tf.logical_not(done)[:, tf.newaxis])  # [n, beam]
  new_scores = tf.where(valid, new_scores, _NEG_INF)
  merged = [tf.concat([old, new], axis=1) for old, new in zip(
      fin, (new_ids, new_attn, new_lps, new_log_probs, new_lengths, new_scores))]
  rank = merged[-1]  # [n, 2*beam]
  if constrained:  # a hypothesis with every constraint met ranks before any without
    fin_met = tf.concat([active["finished_met"], pick(complete)], axis=1)
    rank = tf.where(fin_met, rank, rank - _UNMET)
  _, keep = tf.math.top_k(rank, k=k)  # [n, beam]
  fin = tuple(tf.gather(x, keep, batch_dims=1) for x in merged)
  if constrained:
    active = dict(active, finished_met=tf.gather(fin_met, keep, batch_dims=1))

  # Alive: the beam_size best candidates that do not end with EOS (constrained: allocated
  # over the banks of met constraint tokens).
  alive_scores = tf.where(cand_is_eos, _NEG_INF, cand_scores)  # [n, m]
  if constrained:
    keep = lexical.allocate(alive_scores, tf.reshape(lexical.num_met(met), [sentences, m]), k)
    alive_log_probs = tf.gather(alive_scores, keep, batch_dims=1)  # [n, beam]
    kept = tf.reshape(keep + tf.range(sentences)[:, tf.newaxis] * m, [-1])  # [n*beam]
    active = dict(active, constraints=utils.gather_rows(met, kept))
  else:
    alive_log_probs, keep = tf.math.top_k(alive_scores, k=k)  # [n, beam]
  parents = tf.gather(cand_parents, keep, batch_dims=1)  # [n, beam]
  tokens = tf.gather(cand_tokens, keep, batch_dims=1)  # [n, beam]
  alive_ids, alive_attn, alive_token_lps = extend(
      parents, tokens, tf.gather(cand_token_lps, keep, batch_dims=1))
  new_state = utils.gather_rows(new_state, tf.reshape(parents, [-1]))
  if "prefix" in active:
    active = dict(active, prefix=prefix_lib.advance(
        utils.gather_rows(active["prefix"], tf.reshape(parents, [-1])), time,
        tf.reshape(tokens, [-1]), piece_bytes))

  fin_scores = fin[-1]  # [n, beam], sorted
  num_finished = tf.reduce_sum(tf.cast(fin_scores > _NEG_INF, tf.int32), axis=1)  # [n]
  best_possible = tf.reduce_max(alive_log_probs, axis=1) / active["upper_lp"]  # [n]
  done = tf.reduce_any(tf.stack([
      done, num_finished >= k, time >= active["max_lengths"] - 1,
      best_possible <= fin_scores[:, nbest - 1]]), axis=0)  # [n]
  active = dict(active, tokens=tf.reshape(tokens, [-1]), state=new_state,
                alive=(alive_ids, alive_attn, alive_token_lps,
                       tf.reshape(alive_log_probs, [-1])),
                finished=fin, done=done)
  return dict(loop, time=time + 1, active=active)


# The row entries; the others are per sentence.
_ROW_KEYS = ("tokens", "state", "context", "alive", "row_max_lengths", "prefix", "constraints")


def _gather_finished(loop):
  """The finished buffers [batch, beam, ...] of every sentence: those that left the batch,
  with those of the sentences still in it scattered over them."""
  active = loop["active"]
  at = active["sentences"][:, tf.newaxis]  # [n, 1]
  return tuple(tf.tensor_scatter_nd_update(left, at, now)
               for left, now in zip(loop["left"], active["finished"]))


def _compact(loop, k):
  """The loop with its done sentences (and their beam rows) removed from the active entries,
  if any is done (see greedy's `_compact`); their finished buffers move to "left"."""
  done = loop["active"]["done"]  # [n]

  def drop():
    keep = tf.cast(tf.where(tf.logical_not(done))[:, 0], tf.int32)  # [kept]
    keep_rows = tf.reshape(keep[:, tf.newaxis] * k + tf.range(k), [-1])  # [kept*beam]
    kept = {key: utils.gather_rows(value, keep_rows if key in _ROW_KEYS else keep)
            for key, value in loop["active"].items()}
    return dict(loop, active=kept, left=_gather_finished(loop))

  return tf.cond(tf.reduce_any(done), drop, lambda: loop)
