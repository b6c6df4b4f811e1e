"""Word-level vocabulary with UNK and a size cap (Bahdanau et al., 2015, Sec. 4.1: the
30,000 most frequent words per language), looked up in-graph with ``tf.lookup``."""

import collections
import os
import re
from typing import Iterable, List, Mapping, Optional, Sequence

import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf import write_path
from nmt_tf.data.errors import DataError
from nmt_tf.data.tokenizer import NUM_SPECIAL, Tokenizer

# The same patterns in RE2 (in-graph) and Python ``re`` so that both sides split alike.
_SPACES_RE2 = r"[\t\n\x{000B}\f\r \x{00A0}\x{2000}-\x{200A}\x{3000}]+"
_SPACES_PY = re.compile("[\t\n\x0b\f\r \u00a0\u2000-\u200a\u3000]+")
_PUNCT = r"""([.,!?;:"()\[\]])"""
_PUNCT_PY = re.compile(_PUNCT)
# Detokenization, the inverse of the split for text written the usual way: closing marks
# attach to the word before, opening brackets to the word after, and each pair of double
# quotes to the words inside (an unpaired last quote stays apart). (pattern, replacement)
# in RE2 and Python ``re`` alike; applied in this order.
_ATTACH = ((r'" ([^"]*?) "', r'"\1"'), (r" ([.,!?;:)\]])", r"\1"), (r"([(\[]) ", r"\1"))
_ATTACH_PY = tuple((re.compile(p), r) for p, r in _ATTACH)


def join_words(words: Sequence[str], split_punctuation: bool = True) -> str:
  """Python detokenization: words joined by spaces, punctuation attached (see ``_ATTACH``)."""
  text = " ".join(words)
  if split_punctuation:
    for pattern, replacement in _ATTACH_PY:
      text = pattern.sub(replacement, text)
  return text


def split_words(text: str, split_punctuation: bool = True) -> List[str]:
  """Python pre-tokenization: punctuation marks become words, then whitespace split."""
  text = _SPACES_PY.sub(" ", text)
  if split_punctuation:
    text = _PUNCT_PY.sub(r" \1 ", text)
  return [w for w in text.split(" ") if w]


def count_words(counts: collections.Counter, texts: Iterable[str],
                split_punctuation: bool = True) -> collections.Counter:
  """Adds the words of ``texts`` (split as ``WordTokenizer`` splits them) to ``counts``."""
  for text in texts:
    counts.update(split_words(text, split_punctuation))
  return counts


class WordTokenizer(Tokenizer):
  """Whitespace (and optional punctuation) words; words out of the vocabulary -> UNK.

  Args:
    vocab: tokens by id; the first four must be ``special_tokens.SPECIAL_TOKENS``.
    split_punctuation: split ``. , ! ? ; : " ( ) [ ]`` off words before the lookup, and
      attach them again in ``detokenize``/``decode`` ("a dog ." -> "a dog.").
    name: tf.Module name.
  """

  kind = "word"
  joins_pieces = False
  file_keys = ("vocab",)

  def __init__(self, vocab: Sequence[str], split_punctuation: bool = True,
               name: Optional[str] = None):
    super().__init__(name=name)
    vocab = list(vocab)
    if tuple(vocab[:NUM_SPECIAL]) != special_tokens.SPECIAL_TOKENS:
      raise DataError(f"Received a vocabulary starting with {vocab[:NUM_SPECIAL]}; "
                      f"expected {list(special_tokens.SPECIAL_TOKENS)} first.")
    if len(set(vocab)) != len(vocab):
      raise DataError("Received a vocabulary with duplicate tokens; each word once.")
    self._vocab = vocab
    self._index = {w: i for i, w in enumerate(vocab)}
    self.split_punctuation = split_punctuation
    self._tokens = tf.constant(vocab)  # [vocab]
    self._table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            self._tokens, tf.range(len(vocab), dtype=tf.int32)),
        default_value=special_tokens.UNK_ID)

  @classmethod
  def build(cls, texts: Iterable[str], max_size: int = 30000, min_count: int = 1,
            split_punctuation: bool = True) -> "WordTokenizer":
    """Keeps the ``max_size - 4`` most frequent words (ties: alphabetical).

    Args:
      texts: training sentences.
      max_size: vocabulary size including the 4 reserved tokens.
      min_count: words seen fewer times are left out (become UNK).
      split_punctuation: see the class.
    """
    counts = collections.Counter()
    count_words(counts, texts, split_punctuation)
    return cls.from_counts(counts, max_size, min_count, split_punctuation)

  @classmethod
  def from_counts(cls, counts: Mapping[str, int], max_size: int = 30000, min_count: int = 1,
                  split_punctuation: bool = True) -> "WordTokenizer":
    """``build`` from word counts made by ``count_words`` (e.g. in one pass over a corpus
    for both sides)."""
    if max_size <= NUM_SPECIAL:
      raise DataError(f"Received max_size={max_size}; expected more than the "
                      f"{NUM_SPECIAL} reserved tokens.")
    counts = {w: c for w, c in counts.items() if w not in special_tokens.SPECIAL_TOKENS}
    words = sorted((w for w, c in counts.items() if c >= min_count),
                   key=lambda w: (-counts[w], w))
    vocab = list(special_tokens.SPECIAL_TOKENS) + words[:max_size - NUM_SPECIAL]
    return cls(vocab, split_punctuation)

  def pieces(self, strings: tf.Tensor) -> tf.RaggedTensor:
    strings = tf.strings.regex_replace(strings, _SPACES_RE2, " ")
    if self.split_punctuation:
      strings = tf.strings.regex_replace(strings, _PUNCT, r" \1 ")
    return tf.strings.split(strings)  # [batch, (words)]

  def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
    words = self.pieces(strings)  # [batch, (words)]
    ids = tf.ragged.map_flat_values(self._table.lookup, words)
    # A literal "<s>" etc. in the text is a word like any other: UNK.
    return tf.ragged.map_flat_values(
        lambda x: tf.where(x < NUM_SPECIAL, special_tokens.UNK_ID, x), ids)

  def _detokenize_real(self, ids: tf.RaggedTensor) -> tf.Tensor:
    words = tf.gather(self._tokens, ids)  # [batch, (words)]
    text = tf.strings.reduce_join(words, axis=-1, separator=" ")  # [batch]
    if self.split_punctuation:
      for pattern, replacement in _ATTACH:
        text = tf.strings.regex_replace(text, pattern, replacement)
    return text

  def id_to_token(self, ids: tf.Tensor) -> tf.Tensor:
    return tf.gather(self._tokens, ids)

  @property
  def vocab_size(self) -> int:
    return len(self._vocab)

  @property
  def vocab(self) -> List[str]:
    return list(self._vocab)

  def extended(self, other: "WordTokenizer") -> "WordTokenizer":
    new = [w for w in other.vocab if w not in self._index]
    return WordTokenizer(self._vocab + new, self.split_punctuation)

  def encode(self, text: str) -> List[int]:
    ids = (self._index.get(w, special_tokens.UNK_ID)
           for w in split_words(text, self.split_punctuation))
    return [i if i >= NUM_SPECIAL else special_tokens.UNK_ID for i in ids]

  def _decode_real(self, ids: List[int]) -> str:
    return self.join([self._vocab[i] for i in ids])

  def join(self, words: Sequence[str]) -> str:
    """Words (any strings, e.g. UNKs replaced by source words) -> text, as ``decode``."""
    return join_words(words, self.split_punctuation)

  def _save_files(self, directory: str, prefix: str) -> dict:
    write_path.write_text(os.path.join(directory, f"{prefix}.vocab"),
                          "".join(w + "\n" for w in self._vocab))
    return {"vocab": f"{prefix}.vocab", "split_punctuation": self.split_punctuation}

  @classmethod
  def _from_files(cls, directory: str, meta: dict) -> "WordTokenizer":
    with open(os.path.join(directory, meta["vocab"]), encoding="utf-8") as f:
      vocab = [line.rstrip("\n") for line in f]
    return cls(vocab, meta["split_punctuation"])
