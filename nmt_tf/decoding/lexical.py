"""Lexically constrained beam search with dynamic beam allocation (Post and Vilar, 2018).

Every phrase of a sentence's constraints must appear in its translation. The phrases'
tokens are concatenated into `Constraints.ids` ([batch, L], PAD after), with `continues[b, i]`
marking a token followed by the next token of the same phrase. Each beam row tracks which
constraint tokens it has met (`met` [rows, L]) and the last one it met (`last`, -1 for
none), as Sockeye's ConstrainedHypothesis:
  * a row in the middle of a phrase (its last met token continues) may only go on with the
    phrase's next token; any other token undoes the phrase's tokens met so far;
  * otherwise a token meets the first unmet constraint token that starts a phrase and equals
    it, if any;
  * EOS is allowed once every constraint token is met (at its maximum length the sentence
    still ends: constraints that do not fit are left unmet rather than no translation).

Each step's candidates are, per sentence, the 2 * beam best continuations overall, every
row's continuations that would meet a constraint token (`allowed`), and every row's best
continuation (Post and Vilar's three sources). Duplicates are dropped, and the beam is
allocated over banks of candidates that met as many constraint tokens: candidates are taken
by their rank within their bank, the fuller bank first at equal rank, which spreads the beam
evenly over the banks that have candidates and gives the slots of empty banks to the others
(the striping of fairseq's LexicallyConstrainedBeamSearch). A hypothesis is finished only
with every constraint met.
"""

from typing import NamedTuple

import tensorflow as tf

from nmt_tf.decoding import utils
from nmt_tf.special_tokens import EOS_ID, PAD_ID

_NEG_INF = -float("inf")


class Constraints(NamedTuple):
  """The phrases each sentence's translation must contain.

  Attributes:
    ids: int32 [batch, L]: the tokens of every phrase one after the other, PAD (0) after.
    continues: bool [batch, L]: token i is followed by token i + 1 of the same phrase.
  """

  ids: tf.Tensor
  continues: tf.Tensor


def needed(constraints):
  """int32 [batch]: the constraint tokens of each sentence."""
  return tf.reduce_sum(tf.cast(constraints.ids != PAD_ID, tf.int32), axis=1)


def max_lengths(limits, constraints, max_length):
  """Per-sentence maximum lengths (EOS included) raised to hold every constraint token and
  EOS, at most the static `max_length`. limits: int32 [batch]."""
  return tf.minimum(tf.maximum(limits, needed(constraints) + 1), max_length)


def start(constraints, beam_size):
  """The row entries of the search (row b * beam_size + k): the constraints, nothing met,
  with one PAD column more, so that L > 0 even where no sentence has a constraint."""
  ids = tf.repeat(tf.pad(constraints.ids, [[0, 0], [0, 1]]), beam_size, axis=0)  # [rows, L]
  continues = tf.pad(constraints.continues, [[0, 0], [0, 1]])
  return {"ids": ids, "continues": tf.repeat(continues, beam_size, axis=0),
          "met": tf.zeros(tf.shape(ids), tf.bool), "last": tf.fill(tf.shape(ids)[:1], -1)}


def num_met(rows):
  """int32 [rows]: constraint tokens met."""
  return tf.reduce_sum(tf.cast(rows["met"], tf.int32), axis=1)


def all_met(rows):
  """bool [rows]: every constraint token met."""
  return tf.equal(num_met(rows), tf.reduce_sum(tf.cast(rows["ids"] != PAD_ID, tf.int32), 1))


def _layout(rows):
  """(position [1, L], real [rows, L], starts [rows, L] (a phrase's first token),
  in_progress [rows], next position [rows])."""
  ids, continues, last = rows["ids"], rows["continues"], rows["last"]
  position = tf.range(tf.shape(ids)[1])[tf.newaxis]  # [1, L]
  real = ids != PAD_ID
  after = tf.pad(continues[:, :-1], [[0, 0], [1, 0]])  # the token before continues into it
  starts = tf.logical_and(real, tf.logical_not(after))
  in_progress = tf.logical_and(
      last >= 0, tf.gather(continues, tf.maximum(last, 0), batch_dims=1))  # [rows]
  return position, real, starts, in_progress, last + 1


def allowed(rows):
  """(tokens int32 [rows, L], ok bool [rows, L]): the tokens that would meet a constraint
  token: the next of the phrase in progress, or else every unmet token that starts a phrase."""
  position, real, starts, in_progress, following = _layout(rows)
  ok = tf.where(in_progress[:, tf.newaxis], tf.equal(position, following[:, tf.newaxis]),
                tf.logical_and(starts, tf.logical_not(rows["met"])))
  return rows["ids"], tf.logical_and(ok, real)


def advance(rows, tokens):
  """The row entries after each row emitted tokens int32 [rows] (see the module docstring)."""
  ids, met, last = rows["ids"], rows["met"], rows["last"]
  position, _, starts, in_progress, following = _layout(rows)
  expected = tf.gather(tf.pad(ids, [[0, 0], [0, 1]]), following, batch_dims=1)  # [rows]
  goes_on = tf.equal(tokens, expected)  # (in progress)
  met_next = tf.logical_or(met, tf.equal(position, following[:, tf.newaxis]))
  phrase = tf.cumsum(tf.cast(starts, tf.int32), axis=1)  # [rows, L] phrase number
  current = tf.gather(phrase, tf.maximum(last, 0), batch_dims=1)  # [rows]
  undone = tf.logical_and(tf.equal(phrase, current[:, tf.newaxis]),
                          position <= last[:, tf.newaxis])
  met_undone = tf.logical_and(met, tf.logical_not(undone))
  hits = tf.reduce_all([tf.equal(ids, tokens[:, tf.newaxis]), starts, tf.logical_not(met)],
                       axis=0)  # [rows, L]
  hit = tf.reduce_any(hits, axis=1)  # [rows]
  first = tf.argmax(tf.cast(hits, tf.int32), axis=1, output_type=tf.int32)  # [rows]
  met_hit = tf.logical_or(met, tf.equal(position, first[:, tf.newaxis]))
  new_met = tf.where(in_progress[:, tf.newaxis],
                     tf.where(goes_on[:, tf.newaxis], met_next, met_undone),
                     tf.where(hit[:, tf.newaxis], met_hit, met))
  new_last = tf.where(in_progress, tf.where(goes_on, following, -1),
                      tf.where(hit, first, last))
  return dict(rows, met=new_met, last=new_last)


def forbid_early_eos(log_probs, rows, time, max_lengths):
  """log_probs [rows, vocab] with EOS at -inf on rows with an unmet constraint token, unless
  the row is at its maximum length (max_lengths [rows])."""
  early = tf.logical_and(tf.logical_not(all_met(rows)), time < max_lengths - 1)  # [rows]
  is_eos = tf.equal(tf.range(tf.shape(log_probs)[1]), EOS_ID)[tf.newaxis]
  return tf.where(tf.logical_and(early[:, tf.newaxis], is_eos), _NEG_INF, log_probs)


def candidates(totals, rows, sentences, k):
  """A step's candidates per sentence (the module docstring's three sources, duplicates
  dropped).

  Args:
    totals: float32 [n * k, vocab]: log P of each row extended by each token.
    rows: the row entries, [n * k, ...].
    sentences: n (python int or scalar tensor).
    k: beam size.

  Returns:
    (parents int32 [n, m] rows of n * k, tokens int32 [n, m], scores float32 [n, m], -inf
    for a dropped or impossible candidate).
  """
  vocab = tf.shape(totals)[1]
  offsets = (tf.range(sentences) * k)[:, tf.newaxis]  # [n, 1]
  flat = tf.reshape(totals, [sentences, -1])  # [n, k * vocab]
  top_scores, top_index = utils.top_k(flat, k=2 * k)  # [n, 2k]
  top_parents, top_tokens = offsets + top_index // vocab, top_index % vocab
  row = tf.range(tf.shape(totals)[0])  # [n * k]
  tokens, ok = allowed(rows)  # [n * k, L]
  scores = tf.where(ok, tf.gather(totals, tokens, batch_dims=1), _NEG_INF)
  width = tf.shape(tokens)[1]
  meet_parents = tf.reshape(tf.repeat(row, width), [sentences, -1])  # [n, k * L]
  meet_tokens = tf.reshape(tokens, [sentences, -1])
  meet_scores = tf.reshape(scores, [sentences, -1])
  best = tf.argmax(totals, axis=1, output_type=tf.int32)  # [n * k]
  best_scores = tf.reshape(tf.reduce_max(totals, axis=1), [sentences, k])
  parents = tf.concat([top_parents, meet_parents, tf.reshape(row, [sentences, k])], axis=1)
  tokens = tf.concat([top_tokens, meet_tokens, tf.reshape(best, [sentences, k])], axis=1)
  scores = tf.concat([top_scores, meet_scores, best_scores], axis=1)  # [n, m]
  key = parents * vocab + tokens  # [n, m]
  m = tf.shape(key)[1]
  earlier = tf.range(m)[tf.newaxis, :] < tf.range(m)[:, tf.newaxis]  # [m, m]: j before i
  same = tf.logical_and(tf.equal(key[:, :, tf.newaxis], key[:, tf.newaxis, :]),
                        earlier[tf.newaxis])  # [n, m, m]
  same = tf.logical_and(same, (scores > _NEG_INF)[:, tf.newaxis, :])  # a possible j
  duplicate = tf.reduce_any(same, axis=2)  # [n, m]
  return parents, tokens, tf.where(duplicate, _NEG_INF, scores)


def allocate(scores, met, k):
  """The k candidates that become the alive beams, by dynamic beam allocation.

  Args:
    scores: float32 [n, m], -inf for candidates that may not be kept.
    met: int32 [n, m], the constraint tokens each candidate has met (its bank).
    k: beam size.

  Returns:
    int32 [n, k]: candidate indices, best-allocated first; fewer valid candidates than k
    leave -inf ones at the end.
  """
  valid = scores > _NEG_INF
  m = tf.shape(scores)[1]
  index = tf.range(m)
  same_bank = tf.equal(met[:, :, tf.newaxis], met[:, tf.newaxis, :])  # [n, m, m]
  before = tf.logical_or(scores[:, tf.newaxis, :] > scores[:, :, tf.newaxis],
                         tf.logical_and(tf.equal(scores[:, tf.newaxis, :],
                                                 scores[:, :, tf.newaxis]),
                                        index[tf.newaxis, tf.newaxis, :]
                                        < index[tf.newaxis, :, tf.newaxis]))
  ahead = tf.reduce_all([same_bank, before, tf.broadcast_to(valid[:, tf.newaxis, :],
                                                            tf.shape(same_bank))], axis=0)
  rank = tf.reduce_sum(tf.cast(ahead, tf.int32), axis=2)  # [n, m] rank within the bank
  banks = tf.reduce_max(met) + 1
  order = tf.cast(rank * banks + (banks - 1 - met), tf.float32)  # fuller banks first
  order = tf.where(valid, order, float("inf"))
  _, keep = tf.math.top_k(-order, k=k)  # [n, k]
  return keep
