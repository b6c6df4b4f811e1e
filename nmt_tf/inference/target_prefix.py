"""The `decoding.Prefix` of typed text: forced pieces, and the completion of a last word.

A prefix that does not end with whitespace ends inside a word, which the translator may still
be typing. The pieces before that word are forced; the word's typed characters, its stem, are
left to the search to complete (`decoding/prefix.py`): a step may emit a piece that extends
what remains of the stem or, where pieces join into words (SentencePiece), one that spells a
proper start of it. "Ein Hu" forces "▁Ein" and then allows "▁Hu", "▁Hund", "▁Hunde", or "▁H"
followed by "u", "und", ...; with a word vocabulary, the words that start with "Hu". Matching
is by the surface strings of `id_to_token`, in bytes of UTF-8. Where no piece continues the
stem (a word vocabulary's unknown word, a character outside the vocabulary), UNK is allowed
and ends the completion. A prefix ending with whitespace, or a stem of more than
`MAX_STEM_BYTES` bytes, is forced whole.

Prefixes are cut to `max_pieces` pieces so that the search keeps a step for EOS; the commands
and the Python API refuse a longer prefix before decoding (`Translator.check_prefix`), and the
serving signatures cut it and set `truncated`.
"""

import tensorflow as tf

from nmt_tf.data.tokenizer import NUM_SPECIAL
from nmt_tf.decoding import Prefix
from nmt_tf.special_tokens import UNK_ID

MAX_STEM_BYTES = 48
WORD_START = "\u2581"  # SentencePiece's word-start marker
_NEVER_PART = 1 << 20  # the byte length given to UNK and the reserved tokens: they end a stem


def ends_inside_word(text):
  """bool [batch]: the text is not empty and does not end with whitespace."""
  return tf.logical_and(tf.strings.length(text) > 0,
                        tf.logical_not(tf.strings.regex_full_match(text, r"(?s).*\s")))


def target_prefix(tokenizer, text, max_pieces):
  """The Prefix of each text.

  Args:
    tokenizer: the target tokenizer (`nmt_tf.data.Tokenizer`).
    text: tf.string [batch], the typed start of each translation ("" = none).
    max_pieces: python int, the most pieces a prefix keeps (those of its stem included).

  Returns:
    (Prefix, cut [batch] bool: the prefix had more pieces and was cut).
  """
  ids = tf.cast(tokenizer.tokenize(text), tf.int32)  # [batch, (n)]
  count = tf.cast(ids.row_lengths(), tf.int32)  # [batch]
  cut = count > max_pieces
  count = tf.minimum(count, max_pieces)
  dense = ids[:, :max_pieces].to_tensor()  # [batch, n]
  surfaces = tokenizer.pieces(text)[:, :max_pieces].to_tensor("")  # [batch, n]
  position = tf.range(tf.shape(dense)[1])[tf.newaxis]  # [1, n]
  real = position < count[:, tf.newaxis]  # [batch, n]
  if tokenizer.joins_pieces:  # the last word starts at its last word-start piece
    starts = tf.logical_and(real, tf.strings.regex_full_match(surfaces, WORD_START + ".*"))
    word_start = tf.reduce_max(tf.where(starts, position, 0), axis=1)  # [batch]
  else:
    word_start = tf.maximum(count - 1, 0)
  in_stem = tf.logical_and(real, position >= word_start[:, tf.newaxis])  # [batch, n]
  stem = tf.strings.reduce_join(tf.where(in_stem, surfaces, ""), axis=1)  # [batch]
  stem_bytes = tf.strings.length(stem)
  completing = tf.reduce_all(tf.stack([ends_inside_word(text), count > 0, tf.logical_not(cut),
                                       stem_bytes <= MAX_STEM_BYTES]), axis=0)  # [batch]
  lengths = tf.where(completing, word_start, count)  # forced pieces
  stem_bytes = tf.where(completing, stem_bytes, 0)
  forced = tf.where(position < lengths[:, tf.newaxis], dense, 0)  # [batch, n]
  completion, piece_bytes = _completion(tokenizer, stem, stem_bytes)
  return Prefix(forced, lengths, completion, stem_bytes, piece_bytes), cut


def _completion(tokenizer, stem, stem_bytes):
  """(allowed bool [batch, stem_len, vocab], piece bytes int32 [vocab]): the pieces allowed
  after o bytes of each stem were emitted (see the module docstring)."""
  vocab = tokenizer.id_to_token(tf.range(tokenizer.vocab_size))[tf.newaxis]  # [1, vocab]
  special = tf.range(tokenizer.vocab_size) < NUM_SPECIAL  # [vocab]
  piece_bytes = tf.where(special, _NEVER_PART, tf.strings.length(vocab[0]))  # [vocab]
  batch = tf.shape(stem)[0]
  steps = tf.maximum(tf.reduce_max(stem_bytes), 1)  # the offsets o < stem_len
  offset = tf.range(steps)[tf.newaxis]  # [1, stem_len]
  valid = offset < stem_bytes[:, tf.newaxis]  # [batch, stem_len]
  start = tf.minimum(offset, stem_bytes[:, tf.newaxis])  # [batch, stem_len]
  remaining = stem_bytes[:, tf.newaxis] - start  # [batch, stem_len]
  rest = tf.strings.substr(tf.repeat(stem[:, tf.newaxis], steps, axis=1), start, remaining)
  rest = tf.reshape(rest, [-1, 1])  # [batch * stem_len, 1]
  length = tf.reshape(remaining, [-1, 1])  # [batch * stem_len, 1]
  extends = tf.equal(tf.strings.substr(vocab, tf.zeros_like(length), length), rest)
  allowed = extends  # [batch * stem_len, vocab]
  if tokenizer.joins_pieces:  # or spells a proper start of it
    spelled = tf.equal(tf.strings.substr(rest, tf.zeros_like(vocab, tf.int32),
                                         piece_bytes[tf.newaxis]), vocab)
    allowed = tf.logical_or(allowed, tf.logical_and(spelled, piece_bytes[tf.newaxis] < length))
  allowed = tf.logical_and(allowed, tf.logical_not(special)[tf.newaxis])
  none = tf.logical_not(tf.reduce_any(allowed, axis=1, keepdims=True))
  allowed = tf.logical_or(allowed, tf.logical_and(
      none, tf.equal(tf.range(tokenizer.vocab_size), UNK_ID)[tf.newaxis]))
  allowed = tf.logical_and(tf.reshape(allowed, [batch, steps, -1]), valid[:, :, tf.newaxis])
  return allowed, piece_bytes


def as_typed(tokenizer, prefix, text):
  """Translations that start with their prefix as the translator typed it.

  Where the tokenizer cannot spell the typed characters (an unknown word becomes UNK,
  normalization changes a character), the detokenized pieces of the prefix at the start of a
  translation are replaced by the typed prefix; failing that, those of the prefix without
  its last, completed word. A translation that starts with neither is kept as it is.

  Args:
    tokenizer: the target tokenizer.
    prefix: tf.string [batch], as given to `target_prefix`.
    text: tf.string [batch, nbest], the detokenized translations.

  Returns:
    tf.string [batch, nbest].
  """
  typed = tf.strings.strip(prefix)  # [batch]
  head = tf.strings.strip(tf.strings.regex_replace(typed, r"\S+$", ""))  # without its last word
  head = tf.where(ends_inside_word(prefix), head, "")
  done = tf.zeros(tf.shape(text), tf.bool)  # [batch, nbest]
  for shown in (typed, head):
    spelled = tokenizer.detokenize(tokenizer.tokenize(shown))  # [batch]
    size = tf.broadcast_to(tf.strings.length(spelled)[:, tf.newaxis], tf.shape(text))
    starts = tf.equal(tf.strings.substr(text, tf.zeros_like(size), size),
                      spelled[:, tf.newaxis])  # [batch, nbest]
    starts = tf.logical_and(starts, (tf.strings.length(shown) > 0)[:, tf.newaxis])
    starts = tf.logical_and(starts, tf.logical_not(done))
    start = tf.where(starts, size, 0)  # [batch, nbest]
    rest = tf.strings.substr(text, start, -tf.ones_like(start))  # to the end
    text = tf.where(starts, tf.strings.join([tf.broadcast_to(shown[:, tf.newaxis],
                                                             tf.shape(text)), rest]), text)
    done = tf.logical_or(done, starts)
  return text
