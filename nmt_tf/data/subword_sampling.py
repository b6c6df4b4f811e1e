"""Subword regularization (Kudo 2018): the training pairs segmented anew in every epoch.

A SentencePiece unigram model gives every segmentation x = (x_1, ..., x_M) of a sentence X
the probability P(x) = prod_i p(x_i); tokenization keeps the best one, argmax_x P(x). With
subword regularization, epoch e trains on one segmentation of each sentence drawn from

  P(x | X) = P(x)^alpha / sum_{x' in S_l(X)} P(x')^alpha,

S_l(X) being the l best segmentations of X (`pipeline.subword_nbest` = l), or all of them
when l = -1 (drawn by forward filtering and backward sampling over the lattice). alpha
(`pipeline.subword_alpha`) sharpens the distribution: the larger, the closer to the best
segmentation. The model sees the same sentences cut in many ways, which regularizes it on
small data. Validation, evaluation and decoding keep the best segmentation. With a BPE model
the draw is by BPE-dropout instead (Provilkov et al. 2020): every merge is skipped with
probability alpha, and l plays no part.

The draw replaces the tokenization of `batching.train_batches`: the pairs it shuffles (the
whole in-memory corpus, or one piece of a streamed one) are segmented at once, seeded by the
shuffling seed of the epoch (or piece) and the side, by `segmentation_draws.py`, whose draws
are the same in every process: a run restored in the middle of an epoch trains on the same
segmentations as the run that was not stopped.
The draw holds up the shuffle's first batch, except in a streamed split (every training split
read from files), whose next piece is drawn while the batches of the piece before are trained
on (`stream_order.py`); `bench/bench_data.py --subword_alpha A --subword_nbest L` times the
pipeline's epochs with it, `bench/bench_epochs.py` training across epochs (docs/DATA.md).
"""

import itertools
from typing import List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.data.errors import DataError
from nmt_tf.data.tokenizer import Tokenizer

_EVERYTHING = np.iinfo(np.int64).max  # a batch size that takes every pair in one batch


def check_tokenizers(source_tokenizer: Tokenizer, target_tokenizer: Tokenizer):
  """Raises DataError (one line naming the fix) unless both tokenizers can draw
  segmentations (SentencePiece)."""
  for tokenizer in (source_tokenizer, target_tokenizer):
    if not hasattr(tokenizer, "sample"):
      raise DataError("pipeline.subword_alpha > 0 needs SentencePiece tokenizers "
                      f"(tokenizer.kind=sentencepiece), not {type(tokenizer).__name__}; set "
                      "--config.pipeline.subword_alpha=0.")


def side_seeds(seed: int) -> Tuple[int, int]:
  """(source seed, target seed) of a shuffling seed: distinct for every seed and side."""
  return (2 * seed) % 2 ** 32, (2 * seed + 1) % 2 ** 32


def sampled_rows(pairs: tf.data.Dataset, source_tokenizer: Tokenizer,
                 target_tokenizer: Tokenizer, config, seed) -> tf.data.Dataset:
  """``(source, target)`` strings -> one dict per pair, in the same order, of the model's
  inputs as ``batching.encode_batches`` makes them (``model_inputs``), every sentence
  segmented by a draw under ``seed``.

  Args:
    pairs: ``(source, target)`` strings, all drawn in one call.
    source_tokenizer, target_tokenizer: SentencePiece tokenizers.
    config: ``PipelineConfig``: ``subword_alpha``, ``subword_nbest``.
    seed: a Python int or an int64 scalar tensor.
  """
  return model_inputs(sampled_pairs(pairs, source_tokenizer, target_tokenizer,
                                    config.subword_alpha, config.subword_nbest, seed), config)


def model_inputs(ids: tf.data.Dataset, config) -> tf.data.Dataset:
  """``(source ids, target ids)`` of single pairs -> the model's inputs as
  ``batching.encode_batches`` makes them: ``source``: ids, EOS; ``target_in``: BOS ids; ``target_out``: ids EOS; int32
  [len + 1] each."""
  eos = tf.constant([special_tokens.EOS_ID], tf.int32)
  bos = tf.constant([special_tokens.BOS_ID], tf.int32)

  def inputs(source_ids, target_ids):  # [len] each -> [len + 1] each
    return {"source": tf.concat([source_ids, eos], 0),
            "target_in": tf.concat([bos, target_ids], 0),
            "target_out": tf.concat([target_ids, eos], 0)}

  return ids.map(inputs)


def sampled_pairs(pairs: tf.data.Dataset, source_tokenizer: Tokenizer,
                  target_tokenizer: Tokenizer, alpha: float, nbest: int,
                  seed) -> tf.data.Dataset:
  """``(source, target)`` strings -> ``(source ids, target ids)``, int32 [len] each, in
  the same order, every sentence segmented by a draw (module docstring) under ``seed`` (a
  Python int or an int64 scalar tensor). All pairs of ``pairs`` are drawn in one call."""
  check_tokenizers(source_tokenizer, target_tokenizer)
  return pairs.batch(_EVERYTHING).flat_map(lambda sources, targets: pair_slices(draw(
      sources, targets, source_tokenizer, target_tokenizer, alpha, nbest, seed)))


def draw_all(pairs: tf.data.Dataset, source_tokenizer: Tokenizer,
             target_tokenizer: Tokenizer, alpha: float, nbest: int,
             seed) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
  """``draw`` of every pair of ``pairs`` (none: empty draws), as tensors: for a dataset map
  that makes the draw a stage of its own (``stream_order.py`` prefetches it)."""
  check_tokenizers(source_tokenizer, target_tokenizer)
  none = tf.data.Dataset.from_tensors((tf.zeros([0], tf.string), tf.zeros([0], tf.string)))
  sources, targets = pairs.batch(_EVERYTHING).concatenate(none).take(1).get_single_element()
  return draw(sources, targets, source_tokenizer, target_tokenizer, alpha, nbest, seed)


def draw(sources: tf.Tensor, targets: tf.Tensor, source_tokenizer: Tokenizer,
         target_tokenizer: Tokenizer, alpha: float, nbest: int,
         seed) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
  """String [pairs] each -> (source ids, target ids), int32 [pairs, (len)] each: one
  segmentation of every sentence drawn under ``seed`` (a Python int or an int64 scalar
  tensor), each side with its own seed (``side_seeds``)."""

  def run(sources, targets, seed_value):
    source_seed, target_seed = side_seeds(int(seed_value))
    source_ids = source_tokenizer.sample(_texts(sources), source_seed, alpha, nbest)
    target_ids = target_tokenizer.sample(_texts(targets), target_seed, alpha, nbest)
    return _flat(source_ids) + _flat(target_ids)

  outputs = tf.py_function(run, [sources, targets, tf.cast(seed, tf.int64)],
                           [tf.int32, tf.int64] * 2)
  return (tf.RaggedTensor.from_row_lengths(outputs[0], outputs[1]),
          tf.RaggedTensor.from_row_lengths(outputs[2], outputs[3]))


def pair_slices(drawn: Tuple[tf.RaggedTensor, tf.RaggedTensor]) -> tf.data.Dataset:
  """``draw``'s ragged pair -> a dataset of ``(source ids, target ids)``, int32 [len] each."""
  # Rows of a ragged tensor are ragged of rank 1; tf.identity makes them plain tensors.
  return tf.data.Dataset.from_tensor_slices(drawn).map(
      lambda s, t: (tf.identity(s), tf.identity(t)))


def _texts(strings: tf.Tensor) -> List[str]:
  return [s.decode("utf-8") for s in strings.numpy()]


def _flat(rows: Sequence[List[int]]):
  """Lists of ids -> [int32 ids of all rows, int64 row lengths]."""
  lengths = np.fromiter(map(len, rows), np.int64, len(rows))
  flat = np.fromiter(itertools.chain.from_iterable(rows), np.int32, int(lengths.sum()))
  return [flat, lengths]
