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
SentencePiece draws by BPE-dropout instead (Provilkov et al. 2020): every merge is skipped
with probability alpha, and l plays no part.

The draw replaces the tokenization of `batching.train_batches`: the pairs it shuffles (the
whole in-memory corpus, or one piece of a streamed one) are segmented at once by
SentencePiece's sampling encoder, one thread, seeded by the shuffling seed of the epoch (or
piece) and the side. A run restored in the middle of an epoch thus rebuilds the same
batches. The draw holds up the shuffle's first batch, unless a `Draws` with `ahead` made it
while the previous epoch trained: the trainer's in-memory epochs do (training/data_order.py).
`bench/bench_data.py --subword_alpha A --subword_nbest L` times the epochs with the draw in
them (docs/DATA.md).
"""

import itertools
import threading
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.data.errors import DataError
from nmt_tf.data.tokenizer import Tokenizer

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


class Draws:
  """The segmentations of a corpus drawn under a seed: ``draws(sources, targets, seed)`` ->
  [source ids, source row lengths, target ids, target row lengths] (int32, int64, int32,
  int64), every text of ``sources`` and ``targets`` segmented by a draw (module docstring)
  under the side's seed of ``seed`` (``side_seeds``).

  With ``ahead``, a draw under seed s starts the draw under s + 1 on the same texts in a
  background thread, and a call for s + 1 on the same texts takes it: the epochs of an
  in-memory corpus, epoch e drawn under pipeline.seed + e, then find their segmentations
  made while the previous epoch trained instead of waiting for them. SentencePiece leaves
  Python's lock while it encodes, so the training loop goes on meanwhile. A draw depends
  on its texts and seed alone, so the batches are the same with or without ``ahead``.

  Args:
    source_tokenizer, target_tokenizer: SentencePiece tokenizers.
    alpha, nbest: ``pipeline.subword_alpha`` and ``pipeline.subword_nbest``.
    ahead: draw the next seed's segmentations in the background after each call.
  """

  def __init__(self, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, alpha: float,
               nbest: int, ahead: bool = False):
    check_tokenizers(source_tokenizer, target_tokenizer)
    self.source_tokenizer = source_tokenizer
    self.target_tokenizer = target_tokenizer
    self.alpha = alpha
    self.nbest = nbest
    self.ahead = ahead
    self._pending = None  # (seed, texts' fingerprint, thread, {"result": draw})

  def __call__(self, sources: List[str], targets: List[str], seed: int) -> list:
    drawn = self._take(sources, targets, seed)
    if drawn is None:
      drawn = self.draw(sources, targets, seed)
    if self.ahead:
      self._start(sources, targets, seed + 1)
    return drawn

  def draw(self, sources: List[str], targets: List[str], seed: int) -> list:
    """The draw under ``seed``, made now."""
    source_seed, target_seed = side_seeds(seed)
    source_ids = self.source_tokenizer.sample(sources, source_seed, self.alpha, self.nbest)
    target_ids = self.target_tokenizer.sample(targets, target_seed, self.alpha, self.nbest)
    return _flat(source_ids) + _flat(target_ids)

  @property
  def pending_seed(self) -> Optional[int]:
    """The seed drawn in the background, if any."""
    return None if self._pending is None else self._pending[0]

  def _start(self, sources, targets, seed):
    box = {}

    def run():
      box["result"] = self.draw(sources, targets, seed)

    # A daemon thread: a run that ends in the middle of an epoch does not wait for it.
    thread = threading.Thread(target=run, name="subword-draw-ahead", daemon=True)
    thread.start()
    self._pending = (seed, _fingerprint(sources, targets), thread, box)

  def _take(self, sources, targets, seed):
    """The background draw if it was made under ``seed`` on these texts, else None."""
    pending, self._pending = self._pending, None
    if pending is None:
      return None
    pending_seed, fingerprint, thread, box = pending
    if pending_seed != seed or fingerprint != _fingerprint(sources, targets):
      return None
    thread.join()
    return box.get("result")  # None if it failed: drawn again here, which raises the error


def sampled_rows(pairs: tf.data.Dataset, source_tokenizer: Tokenizer,
                 target_tokenizer: Tokenizer, config, seed,
                 draws: Optional[Draws] = None) -> tf.data.Dataset:
  """``(source, target)`` strings -> one dict per pair, in the same order, of the model's
  inputs as ``batching.encode_batches`` makes them (``source``: ids, reversed if
  ``config.reverse_source``, EOS; ``target_in``: BOS ids; ``target_out``: ids EOS; int32
  [len + 1] each), every sentence segmented by a draw under ``seed``.

  Args:
    pairs: ``(source, target)`` strings, all drawn in one call.
    source_tokenizer, target_tokenizer: SentencePiece tokenizers.
    config: ``PipelineConfig``: ``subword_alpha``, ``subword_nbest``, ``reverse_source``.
    seed: a Python int or an int64 scalar tensor.
    draws: the ``Draws`` that segments them (one with ``config``'s alpha and nbest when
      None).
  """
  eos = tf.constant([special_tokens.EOS_ID], tf.int32)
  bos = tf.constant([special_tokens.BOS_ID], tf.int32)

  def inputs(source_ids, target_ids):  # [len] each -> [len + 1] each
    if config.reverse_source:
      source_ids = tf.reverse(source_ids, axis=[0])
    return {"source": tf.concat([source_ids, eos], 0),
            "target_in": tf.concat([bos, target_ids], 0),
            "target_out": tf.concat([target_ids, eos], 0)}

  return sampled_pairs(pairs, source_tokenizer, target_tokenizer, config.subword_alpha,
                       config.subword_nbest, seed, draws).map(inputs)


def sampled_pairs(pairs: tf.data.Dataset, source_tokenizer: Tokenizer,
                  target_tokenizer: Tokenizer, alpha: float, nbest: int,
                  seed, draws: Optional[Draws] = None) -> tf.data.Dataset:
  """``(source, target)`` strings -> ``(source ids, target ids)``, int32 [len] each, in
  the same order, every sentence segmented by a draw (module docstring) under ``seed`` (a
  Python int or an int64 scalar tensor). All pairs of ``pairs`` are drawn in one call, by
  ``draws`` (a ``Draws`` of these tokenizers, alpha and nbest) when it is given."""
  if draws is None:
    draws = Draws(source_tokenizer, target_tokenizer, alpha, nbest)

  def draw(sources, targets, seed_value):
    return draws(_texts(sources), _texts(targets), int(seed_value))

  def sample(sources, targets):
    outputs = tf.py_function(draw, [sources, targets, tf.cast(seed, tf.int64)],
                             [tf.int32, tf.int64] * 2)
    source = tf.RaggedTensor.from_row_lengths(outputs[0], outputs[1])  # [pairs, (len)]
    target = tf.RaggedTensor.from_row_lengths(outputs[2], outputs[3])
    # Rows of a ragged tensor are ragged of rank 1; tf.identity makes them plain tensors.
    return tf.data.Dataset.from_tensor_slices((source, target)).map(
        lambda s, t: (tf.identity(s), tf.identity(t)))

  everything = np.iinfo(np.int64).max
  return pairs.batch(everything).flat_map(sample)


def _texts(strings: tf.Tensor) -> List[str]:
  return [s.decode("utf-8") for s in strings.numpy()]


def _fingerprint(sources: List[str], targets: List[str]) -> Tuple[int, int, int]:
  return len(sources), hash(tuple(sources)), hash(tuple(targets))


def _flat(rows: Sequence[List[int]]):
  """Lists of ids -> [int32 ids of all rows, int64 row lengths]."""
  lengths = np.fromiter(map(len, rows), np.int64, len(rows))
  flat = np.fromiter(itertools.chain.from_iterable(rows), np.int32, int(lengths.sum()))
  return [flat, lengths]
