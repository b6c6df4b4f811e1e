"""A vocabulary shortlist for the output layer, as Marian's lexical shortlist.

For each batch of source sentences the search scores only a subset V' of the target
vocabulary, so that the output product, the softmax and the argmax or top-k run over |V'|
words instead of |V|:

  V' = {PAD, UNK, BOS, EOS}  u  F_f  u  U_{s in the batch's sources} L_k(s)

F_f: the f most frequent target words of the training data (`decode.shortlist_frequent`).
L_k(s): the k target words with the highest Dice coefficient with source word s
(`decode.shortlist`),

  Dice(s, t) = 2 c(s, t) / (c(s) + c(t))

with c counting sentence pairs: c(s, t) the pairs whose source holds s and whose target holds
t, c(s) and c(t) the pairs that hold each. Marian builds L_k from fast_align's lexical
probabilities; co-occurrence needs no aligner and is what the table's name says.

V' keeps the ids 0..3 first and in order (the special tokens), so the searches' length
constraints, which name EOS, PAD and BOS by id, hold in V' unchanged; the searches see
positions in V', the model the words of V' (`Translator` maps them). A word outside V' cannot
be chosen: the search is exact only with the shortlist off (`decode.shortlist=0`, the
default). The table is built from the run's training data on first use and kept in
`RUN/shortlist.npz` (docs/DECODING.md).
"""

import io
import os
import sys

import numpy as np
import tensorflow as tf

from nmt_tf import write_path
from nmt_tf import data
from nmt_tf.experiment.config import SHORTLIST_CANDIDATES
from nmt_tf.experiment.run_dir import RunDir, RunDirError, SHORTLIST_FILE
from nmt_tf.special_tokens import EOS_ID, SPECIAL_TOKENS

FILE_NAME = SHORTLIST_FILE
MAX_SENTENCES = 1_000_000  # training pairs counted (a seeded sample of larger corpora)
_CHUNK = 4096  # sentence pairs tokenized and counted at once


def count_cooccurrences(source_ids, target_ids, source_vocab, target_vocab):
  """Sentence co-occurrence counts of source and target words.

  Args:
    source_ids, target_ids: sequences of int arrays, one per sentence pair.
    source_vocab, target_vocab: vocabulary sizes.

  Returns:
    (pairs int64 [n] coded s * target_vocab + t, pair counts int64 [n], c(s) int64
    [source_vocab], c(t) int64 [target_vocab], target word frequencies int64 [target_vocab]).
  """
  codes, counts = np.zeros([0], np.int64), np.zeros([0], np.int64)
  c_source = np.zeros([source_vocab], np.int64)
  c_target = np.zeros([target_vocab], np.int64)
  frequency = np.zeros([target_vocab], np.int64)
  batch = []
  for i, (src, tgt) in enumerate(zip(source_ids, target_ids)):
    s, t = np.unique(src), np.unique(tgt)
    c_source[s] += 1
    c_target[t] += 1
    np.add.at(frequency, np.asarray(tgt, np.int64), 1)
    batch.append((s[:, None].astype(np.int64) * target_vocab + t[None, :]).ravel())
    if len(batch) == _CHUNK or i == len(source_ids) - 1:
      merged = np.concatenate([codes] + batch)
      weights = np.concatenate([counts, np.ones([len(merged) - len(codes)], np.int64)])
      codes, inverse = np.unique(merged, return_inverse=True)
      counts = np.bincount(inverse, weights=weights).astype(np.int64)
      batch = []
  return codes, counts, c_source, c_target, frequency


def build_table(source_ids, target_ids, source_vocab, target_vocab,
                candidates=SHORTLIST_CANDIDATES):
  """The shortlist table of tokenized sentence pairs (see the module docstring).

  Returns:
    (table int32 [source_vocab, candidates]: each source word's target words by decreasing
    Dice, EOS where it has fewer; frequent int32 [target_vocab]: the target words by
    decreasing frequency).
  """
  source_ids, target_ids = list(source_ids), list(target_ids)
  codes, counts, c_source, c_target, frequency = count_cooccurrences(
      source_ids, target_ids, source_vocab, target_vocab)
  s, t = codes // target_vocab, codes % target_vocab  # [n]
  dice = 2.0 * counts / (c_source[s] + c_target[t])  # [n]
  order = np.lexsort((t, -dice, s))  # by source word, then decreasing Dice (ties: lower id)
  s, t = s[order], t[order]
  starts = np.searchsorted(s, np.arange(source_vocab))  # first pair of each source word
  rank = np.arange(len(s)) - starts[s]  # [n] 0 for the best translation of its word
  keep = rank < candidates
  table = np.full([source_vocab, candidates], EOS_ID, np.int32)
  table[s[keep], rank[keep]] = t[keep]
  frequent = np.argsort(-frequency, kind="stable").astype(np.int32)  # [target_vocab]
  return table, frequent


class Shortlist:
  """The per-batch vocabulary V' of a shortlist table (see the module docstring).

  Args:
    table: int32 [source_vocab, candidates] from `build_table`.
    frequent: int32 [target_vocab] target words by decreasing frequency.
    per_source: k, translations taken per source word (<= candidates).
    num_frequent: f, frequent target words always included.
  """

  def __init__(self, table, frequent, per_source, num_frequent):
    table, frequent = np.asarray(table, np.int32), np.asarray(frequent, np.int32)
    if not 1 <= per_source <= table.shape[1]:
      raise ValueError(f"Received per_source={per_source}; expected 1 to {table.shape[1]}, "
                       "the translations per source word in the table.")
    self.target_vocab = len(frequent)
    self.per_source = per_source
    self.num_frequent = min(num_frequent, self.target_vocab)
    self._table = tf.constant(table[:, :per_source])  # [source_vocab, k]
    always = np.concatenate([np.arange(len(SPECIAL_TOKENS)), frequent[:self.num_frequent]])
    self._always = tf.constant(always.astype(np.int32))  # [specials + f]

  def vocabulary(self, source, prefix=None, constraints=None):
    """source int32 [batch, src_len] -> V' int32 [n]: sorted target ids, 0..3 first. With a
    `decoding.Prefix` (full-vocabulary ids), V' also holds its forced pieces and every piece
    that may complete one of its words; with `decoding.Constraints`, their tokens."""
    candidates = tf.reshape(tf.gather(self._table, source), [-1])  # [batch * src_len * k]
    ids = tf.concat([self._always, candidates], axis=0)  # [m]
    present = tf.scatter_nd(ids[:, tf.newaxis], tf.ones_like(ids), [self.target_vocab])
    if prefix is not None:
      forced = tf.reshape(prefix.ids, [-1])  # [batch * prefix_len], PAD included
      present += tf.scatter_nd(forced[:, tf.newaxis], tf.ones_like(forced), [self.target_vocab])
      present += tf.cast(tf.reduce_any(prefix.completion, axis=[0, 1]), tf.int32)  # [vocab]
    if constraints is not None:
      needed = tf.reshape(constraints.ids, [-1])  # PAD included
      present += tf.scatter_nd(needed[:, tf.newaxis], tf.ones_like(needed), [self.target_vocab])
    return tf.cast(tf.where(present > 0)[:, 0], tf.int32)  # [n], ascending


def load_or_build(run_dir, decode, corpus, source_tokenizer, target_tokenizer):
  """The `Shortlist` of `decode` (a DecodeConfig) for the run in `run_dir`, or None when it
  is off.

  Reads `run_dir/shortlist.npz`, or builds the table from the training split of `corpus`
  (the run's CorpusConfig) and writes it there first.

  Raises:
    RunDirError: the file does not match the run's vocabularies, or is unreadable.
    DataError: the training data cannot be read.
  """
  if not decode.shortlist:
    return None
  path = RunDir(run_dir).shortlist_path
  vocabs = (source_tokenizer.vocab_size, target_tokenizer.vocab_size)
  if not os.path.exists(path):
    print(f"shortlist: counting the co-occurrences of the training data (at most "
          f"{MAX_SENTENCES:,} pairs) into {path}", file=sys.stderr)
    table, frequent = build_from_split(data.load_corpus(corpus)["train"], source_tokenizer,
                                       target_tokenizer)
    stream = io.BytesIO()
    np.savez(stream, table=table, frequent=frequent)
    write_path.write_bytes(path, stream.getvalue())
  try:
    with np.load(path) as stored:
      table, frequent = stored["table"], stored["frequent"]
  except (OSError, ValueError, KeyError) as error:
    raise RunDirError(f"{path} is unreadable ({error}); move it away so that the next "
                      "call rebuilds it from the training data.") from error
  if (table.shape[0], len(frequent)) != vocabs or table.shape[1] < decode.shortlist:
    raise RunDirError(f"{path} holds a table for vocabularies of {table.shape[0]} and "
                      f"{len(frequent)} words with {table.shape[1]} translations each; the run "
                      f"has {vocabs[0]} and {vocabs[1]} and asks for {decode.shortlist}: move "
                      "it away so that the next call rebuilds it.")
  return Shortlist(table, frequent, decode.shortlist, decode.shortlist_frequent)


def build_from_split(split, source_tokenizer, target_tokenizer):
  """`build_table` of a training split (a data.load_corpus split, at most MAX_SENTENCES pairs
  of it) tokenized with the run's tokenizers."""
  sources, targets = [], []
  for source, target in data.sample_texts(split, MAX_SENTENCES):
    sources.append(source)
    targets.append(target)
  tokenize = lambda tokenizer, lines: [  # pylint: disable=g-long-lambda
      ids for start in range(0, len(lines), _CHUNK)
      for ids in tokenizer.tokenize(tf.constant(lines[start:start + _CHUNK])).numpy()]
  return build_table(tokenize(source_tokenizer, sources), tokenize(target_tokenizer, targets),
                     source_tokenizer.vocab_size, target_tokenizer.vocab_size)
