"""Subword regularization (Kudo 2018): the training pairs segmented anew in every epoch.

A SentencePiece unigram model gives every segmentation x = (x_1, ..., x_M) of a sentence X
the probability P(x) = prod_i p(x_i); tokenization keeps the best one, argmax_x P(x). With
subword regularization, epoch e trains on one segmentation of each sentence drawn from

  P(x | X) = P(x)^alpha / sum_{x' in S_l(X)} P(x')^alpha,

S_l(X) being the l best segmentations of X (`pipeline.subword_nbest` = l), or all of them
when l = -1 (drawn by forward filtering and backward sampling over the lattice). alpha
(`pipeline.subword_alpha`) sharpens the distribution: the larger, the closer to the best
segmentation. The model sees the same sentences cut in many ways, which regularizes it on
small data. Validation, evaluation and decoding keep the best segmentation.

Epoch e draws with the seeds of the epoch's shuffle (`pipeline.seed + e`; one per side),
one thread at a time, so a run restored in the middle of an epoch rebuilds the same batches.
The draw is SentencePiece's sampling encoder over the whole split, before the epoch's first
batch: about 1 s per side for Multi30k's 29,000 sentences with l = -1 and 3 s with l = 64 on
an AMD EPYC family 26. In-memory corpora with SentencePiece tokenizers only.
"""

import itertools
from typing import List, Sequence

import numpy as np
import tensorflow as tf

from nmt_tf.data.batching import add_bos_eos, add_eos, PipelineConfig
from nmt_tf.data.errors import DataError
from nmt_tf.data.text_files import ParallelText
from nmt_tf.data.tokenizer import Tokenizer


def side_seeds(seed: int):
  """(source seed, target seed) of a shuffling seed: distinct for every seed and side."""
  return (2 * seed) % 2 ** 32, (2 * seed + 1) % 2 ** 32


def check_split(split, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer):
  """Raises DataError (one line naming the fix) unless the training split is read into
  memory (ParallelText: text files, not shards or TFDS) and both tokenizers can sample."""
  if not isinstance(split, ParallelText):
    raise DataError("pipeline.subword_alpha > 0 needs a training corpus read into memory "
                    "(text files, not shards or TFDS); set --config.pipeline.subword_alpha=0.")
  for tokenizer in (source_tokenizer, target_tokenizer):
    if not hasattr(tokenizer, "sample"):
      raise DataError("pipeline.subword_alpha > 0 needs SentencePiece tokenizers "
                      f"(tokenizer.kind=sentencepiece), not {type(tokenizer).__name__}; set "
                      "--config.pipeline.subword_alpha=0.")


def sampled_rows(split, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                 config: PipelineConfig) -> tf.data.Dataset:
  """One pair per element, in corpus order: dicts of ``source`` (ids, reversed if
  ``config.reverse_source``, EOS), ``target_in`` (BOS ids) and ``target_out`` (ids EOS),
  int32 [(len + 1)], each side segmented by a draw under ``config.seed``.

  Raises:
    DataError: see ``check_split``.
  """
  check_split(split, source_tokenizer, target_tokenizer)
  source_seed, target_seed = side_seeds(config.seed)
  sources = _ragged(source_tokenizer.sample(split.sources, source_seed,
                                            config.subword_alpha, config.subword_nbest))
  targets = _ragged(target_tokenizer.sample(split.targets, target_seed,
                                            config.subword_alpha, config.subword_nbest))
  target_in, target_out = add_bos_eos(targets)  # [pairs, (len + 1)] each
  return tf.data.Dataset.from_tensor_slices(
      {"source": add_eos(sources, config.reverse_source), "target_in": target_in,
       "target_out": target_out})


def _ragged(rows: Sequence[List[int]]) -> tf.RaggedTensor:
  """Lists of ids -> int32 ragged [len(rows), (ids)]."""
  lengths = np.fromiter(map(len, rows), np.int64, len(rows))
  flat = np.fromiter(itertools.chain.from_iterable(rows), np.int32, int(lengths.sum()))
  return tf.RaggedTensor.from_row_lengths(flat, lengths)
