"""Word-level confidence: the log-probabilities the search gave each piece, summed per word.

A piece's confidence is log p(y_t | y_<t, x), the model's own probability of the piece where
the search chose it (`DecodeResult.token_log_probs`). A word's is the sum over its pieces,
the log-probability of the word as a whole given what precedes it. Words are the pieces
joined: a SentencePiece piece that starts with "▁" starts a word; with a word vocabulary each
token is one word. EOS belongs to no word (its log-probability stays in the pieces'). The
mean piece log-probability of a sentence is an unsupervised estimate of its quality
(Fomicheva et al., 2020; measured against chrF in docs/DECODING.md).
"""

import tensorflow as tf

WORD_START = "\u2581"  # SentencePiece's word-start marker


def word_tensors(pieces, log_probs, lengths, joins_pieces):
  """The words of hypotheses and their log-probabilities.

  Args:
    pieces: tf.string [batch, nbest, len]: each hypothesis' token strings, EOS at
      `lengths - 1` (left out of every word), anything after.
    log_probs: float32 [batch, nbest, len]: each piece's log-probability.
    lengths: int32 [batch, nbest]: tokens per hypothesis, EOS included (0 = none).
    joins_pieces: python bool: pieces join into words at each word-start marker
      (SentencePiece); False: each piece is a word.

  Returns:
    (words tf.string [batch, nbest, n_words] without the marker, "" after `word_count`;
    word_log_probs float32 [batch, nbest, n_words], 0 after; word_count int32 [batch, nbest]).
  """
  shape = tf.shape(pieces)
  position = tf.range(shape[2])[tf.newaxis, tf.newaxis]  # [1, 1, len]
  real = position < (lengths - 1)[:, :, tf.newaxis]  # [batch, nbest, len], EOS excluded
  starts = real
  if joins_pieces:
    marked = tf.strings.regex_full_match(pieces, WORD_START + ".*")
    starts = tf.logical_and(real, tf.logical_or(marked, tf.equal(position, 0)))
    pieces = tf.strings.regex_replace(pieces, WORD_START, "")
  index = tf.cumsum(tf.cast(starts, tf.int32), axis=2) - 1  # [batch, nbest, len]
  count = tf.reduce_sum(tf.cast(starts, tf.int32), axis=2)  # [batch, nbest]
  width = tf.maximum(tf.reduce_max(tf.concat([tf.reshape(count, [-1]), [0]], 0)), 0)
  rows = shape[0] * shape[1]
  row = tf.reshape(tf.range(rows), [shape[0], shape[1], 1])
  segment = tf.where(real, row * width + index, rows * width)  # the last segment: padding
  segments = rows * width + 1
  words = tf.strings.unsorted_segment_join(tf.reshape(pieces, [-1]), tf.reshape(segment, [-1]),
                                        segments)[:-1]
  word_log_probs = tf.math.unsorted_segment_sum(tf.reshape(log_probs, [-1]),
                                                tf.reshape(segment, [-1]), segments)[:-1]
  out_shape = tf.stack([shape[0], shape[1], width])
  return (tf.reshape(words, out_shape), tf.reshape(word_log_probs, out_shape), count)
