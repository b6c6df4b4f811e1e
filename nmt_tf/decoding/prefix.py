"""A target prefix the searches continue from (interactive translation).

The first `lengths[b]` tokens of sentence b are forced: at step t < lengths[b] every token
but `ids[b, t]` gets -inf, and the forced token keeps the model's log-probability, so the
prefix's log P(y_<=t | x) is part of the hypothesis' log-probability and score (as prefix
decoding in Sockeye, Marian and CTranslate2).

A prefix that ends inside a word leaves that word out of `ids`: its typed characters, the
stem (`stem_bytes[b]` bytes of UTF-8), are completed by the pieces that follow. Each such step
allows the pieces that extend what remains of the stem ("Hu" -> "Hund") and, where pieces
join into words, those that spell a proper start of it ("H", then "u..."): `completion[b, o]`
is that set after o bytes of the stem were emitted. A row moves on by the byte length of its
piece (`piece_bytes`) and is free once a piece reached the end of the stem. The completion
thus follows the model's own segmentation of the word instead of the tokenizer's segmentation
of the typed characters (`inference/target_prefix.py` builds the tables).

EOS forcing at a sentence's maximum length wins over the prefix, so every hypothesis ends;
the maximum is raised to hold the prefix (`max_lengths`), and the callers check that the
static `max_length` holds it (`Translator.check_prefix`).
"""

from typing import NamedTuple, Optional

import tensorflow as tf

_NEG_INF = -float("inf")
DONE = -1  # the completion offset of a row that completes no word (any more)


class Prefix(NamedTuple):
  """The forced start of each sentence's translation.

  Attributes:
    ids: int32 [batch, prefix_len]: the forced tokens, PAD (0) after `lengths`.
    lengths: int32 [batch]: forced tokens per sentence (0 = no prefix).
    completion: optional bool [batch, stem_len, vocab]: the tokens allowed after o bytes of
      the stem were emitted (see the module docstring). None: no sentence ends inside a word.
    stem_bytes: optional int32 [batch]: bytes of the word to complete (0 = none).
    piece_bytes: optional int32 [vocab]: the byte length of each token's surface string.
  """

  ids: tf.Tensor
  lengths: tf.Tensor
  completion: Optional[tf.Tensor] = None
  stem_bytes: Optional[tf.Tensor] = None
  piece_bytes: Optional[tf.Tensor] = None


def max_lengths(limits, prefix, max_length):
  """Per-sentence maximum lengths (EOS included) raised to hold each prefix, the pieces of
  its completion (at most one per byte) and EOS, at most the static `max_length`.
  limits: int32 [batch]."""
  steps = prefix.lengths
  if prefix.completion is not None:
    steps += prefix.stem_bytes
  return tf.minimum(tf.maximum(limits, steps + 1), max_length)


def start(prefix, beam_size=1):
  """The search's prefix entries: per row (`beam_size` rows per sentence, row
  b * beam_size + k) the forced ids (one PAD column more, so that a step past them reads PAD),
  their count and the completion offset; per sentence the completion table (or None)."""
  tile = lambda x: tf.repeat(x, beam_size, axis=0)  # pylint: disable=unnecessary-lambda-assignment
  rows = {"ids": tile(tf.pad(prefix.ids, [[0, 0], [0, 1]])),  # [rows, prefix_len + 1]
          "lengths": tile(prefix.lengths)}
  if prefix.completion is None:
    return rows, None
  rows["offset"] = tf.where(tile(prefix.stem_bytes) > 0, 0, DONE)  # [rows]
  rows["stem_bytes"] = tile(prefix.stem_bytes)
  return rows, prefix.completion


def restrict(log_probs, time, rows, completion, max_lengths, beam_size=1):
  """log_probs float32 [rows, vocab] of step `time` with the prefix applied: -inf everywhere
  but the forced token on rows inside their prefix, and outside the completion's allowed set
  on rows completing a word; rows at their maximum length are left to EOS.

  Args:
    rows: the row entries of `start`.
    completion: the per-sentence table of `start`, or None.
    max_lengths: int32 [rows].
    beam_size: rows per sentence.
  """
  vocab = tf.shape(log_probs)[-1]
  ids = rows["ids"]  # [rows, prefix_len + 1]
  forced = tf.gather(ids, tf.minimum(time, tf.shape(ids)[1] - 1), axis=1)  # [rows]
  inside = (time < rows["lengths"])[:, tf.newaxis]  # [rows, 1]
  allowed = tf.equal(tf.range(vocab)[tf.newaxis, :], forced[:, tf.newaxis])  # [rows, vocab]
  allowed = tf.logical_or(tf.logical_not(inside), allowed)
  if completion is not None:
    completing = tf.logical_and(time >= rows["lengths"], rows["offset"] >= 0)  # [rows]
    at = tf.stack([tf.range(tf.shape(log_probs)[0]) // beam_size,
                   tf.maximum(rows["offset"], 0)], axis=1)  # [rows, 2]
    extends = tf.gather_nd(completion, at)  # [rows, vocab]
    allowed = tf.logical_and(allowed, tf.logical_or(tf.logical_not(completing)[:, tf.newaxis],
                                                    extends))
  allowed = tf.logical_or(allowed, (time >= max_lengths - 1)[:, tf.newaxis])
  return tf.where(allowed, log_probs, _NEG_INF)


def advance(rows, time, tokens, piece_bytes):
  """The row entries after the rows emitted `tokens` int32 [rows] at step `time`: a completing
  row moves on by the token's bytes, and is done once the token reached the stem's end."""
  if "offset" not in rows:
    return rows
  offset = rows["offset"]
  completing = tf.logical_and(time >= rows["lengths"], offset >= 0)  # [rows]
  moved = offset + tf.gather(piece_bytes, tokens)  # [rows]
  following = tf.where(moved < rows["stem_bytes"], moved, DONE)
  return dict(rows, offset=tf.where(completing, following, offset))
