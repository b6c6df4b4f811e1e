"""Batching, below both orders of the training data (pipeline.py's in-memory epochs and
stream_order.py's streamed pieces): the batching options, the one place that turns strings
into model ids (``encode_source``/``encode_target``, for training, evaluation and export
alike), the length filter (RNNsearch-30/-50, Bahdanau et al., 2015, Sec. 4.2) and the
bucketing of pairs under a budget of padded tokens.

Every batch is a dict of int32 tensors padded with PAD=0:
``source`` [batch, src_len] (ids, EOS), ``target_in`` [batch, tgt_len] (BOS, ids) and
``target_out`` [batch, tgt_len] (ids, EOS).
"""

import dataclasses
from typing import Any, List, Mapping, Tuple, Union

from absl import logging
import numpy as np
import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.data import subword_sampling
from nmt_tf.data.errors import DataError
from nmt_tf.data.shards import ParallelShards
from nmt_tf.data.text_files import ParallelText
from nmt_tf.data.tokenizer import Tokenizer

Split = Union[ParallelText, ParallelShards, tf.data.Dataset]
_AUTOTUNE = tf.data.AUTOTUNE


@dataclasses.dataclass
class PipelineConfig:
  """Batching options.

  Attributes:
    max_source_len: training pairs with more source tokens (EOS not counted) are
      skipped; 0 keeps all.
    max_target_len: the same for the target side.
    batch_tokens: budget of padded tokens per training batch: batch_size * max(length)
      stays <= batch_tokens, length counting EOS/BOS.
    batch_size: when > 0, training batches of this many pairs instead (still bucketed).
    bucket_width: length range of one bucket, in tokens: narrower buckets pad less, wider
      ones make fewer batch shapes (docs/PERFORMANCE.md, "Design choices, measured":
      `pipeline.bucket_width` 5 -> 2).
    shuffle_buffer: pairs shuffled together. 0: a whole in-memory corpus; pieces of
      200,000 pairs of a streamed corpus (ParallelShards, stream_order.py), whose pieces
      are shuffled whole, one after the other, a larger corpus in several; 100,000 pairs
      for a tf.data corpus.
    seed: shuffling seed; the order of every epoch (and its subword draws) is fixed by it.
    eval_batch_size: pairs per evaluation batch.
    tokenize_batch: strings tokenized per call inside the pipeline.
    subword_alpha: subword regularization (Kudo 2018, ``subword_sampling.py``): when > 0,
      every epoch segments the training pairs anew, each segmentation x of a sentence drawn
      with probability proportional to P(x)^subword_alpha under the SentencePiece unigram
      model; 0 keeps the one best segmentation. Validation and decoding always use that one.
    subword_nbest: the segmentations drawn from: the subword_nbest best (2 to 512), or all
      of them when -1. With BPE models (tokenizer.model_type="bpe") the draw is by
      BPE-dropout instead (Provilkov et al. 2020): each merge is skipped with probability
      subword_alpha, and subword_nbest plays no part.
  """
  max_source_len: int = 50
  max_target_len: int = 50
  batch_tokens: int = 4096
  batch_size: int = 0
  bucket_width: int = 2
  shuffle_buffer: int = 0
  seed: int = 0
  eval_batch_size: int = 64
  tokenize_batch: int = 1024
  subword_alpha: float = 0.0
  subword_nbest: int = -1

  def __post_init__(self):
    if not (isinstance(self.subword_alpha, (int, float)) and self.subword_alpha >= 0):
      raise DataError(f"Received subword_alpha={self.subword_alpha!r}; expected a number "
                      f">= 0 (0 turns subword sampling off).")
    if not (isinstance(self.subword_nbest, int) and (self.subword_nbest == -1
                                                     or 1 < self.subword_nbest <= 512)):
      raise DataError(f"Received subword_nbest={self.subword_nbest!r}; expected -1 (all "
                      f"segmentations) or an integer from 2 to 512 (SentencePiece's n-best).")
    for name in ("max_source_len", "max_target_len", "batch_size", "shuffle_buffer"):
      if getattr(self, name) < 0:
        raise DataError(f"Received {name}={getattr(self, name)}; expected an integer >= 0.")
    for name in ("batch_tokens", "bucket_width", "eval_batch_size", "tokenize_batch"):
      if getattr(self, name) < 1:
        raise DataError(f"Received {name}={getattr(self, name)}; expected an integer >= 1.")

  @classmethod
  def from_dict(cls, values: Mapping[str, Any]) -> "PipelineConfig":
    """Builds a config, rejecting unknown keys."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise DataError(f"Unknown pipeline config keys {unknown}; expected some of "
                      f"{sorted(known)}.")
    return cls(**values)


@dataclasses.dataclass
class FilterStats:
  """What the training filters removed from one split."""
  total: int
  empty: int
  source_too_long: int
  target_too_long: int
  kept: int
  longest_source: int
  longest_target: int


def encode_source(tokenizer: Tokenizer, strings: tf.Tensor) -> tf.RaggedTensor:
  """tf.string [batch] -> int32 ragged [batch, (len + 1)]: ids, EOS."""
  ids = tokenizer.tokenize(strings)  # [batch, (len)]
  eos = tf.fill([ids.nrows(), 1], tf.constant(special_tokens.EOS_ID, tf.int32))
  return tf.concat([ids, eos], axis=1)  # [batch, (len + 1)]


def encode_target(tokenizer: Tokenizer,
                  strings: tf.Tensor) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
  """tf.string [batch] -> (target_in: BOS ids, target_out: ids EOS), [batch, (len + 1)]."""
  return add_bos_eos(tokenizer.tokenize(strings))  # [batch, (len)] ids


def add_bos_eos(ids: tf.RaggedTensor) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
  """Target ids [batch, (len)] -> (target_in: BOS ids, target_out: ids EOS), [batch, (len + 1)].
  """
  ids = tf.cast(ids, tf.int32)
  column = tf.ones([ids.nrows(), 1], tf.int32)  # [batch, 1]
  target_in = tf.concat([column * special_tokens.BOS_ID, ids], axis=1)
  target_out = tf.concat([ids, column * special_tokens.EOS_ID], axis=1)
  return target_in, target_out


def as_dataset(split: Split) -> tf.data.Dataset:
  """A split as a tf.data.Dataset of (source, target) strings."""
  if isinstance(split, ParallelText):
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(split.sources, tf.string), tf.constant(split.targets, tf.string)))
  if isinstance(split, ParallelShards):
    return split.dataset()
  if isinstance(split, tf.data.Dataset):
    return split
  raise DataError(f"Received a split of type {type(split).__name__}; expected a "
                  f"ParallelText, ParallelShards or a tf.data.Dataset of (source, target) "
                  f"strings.")


def encode_batches(pairs: tf.data.Dataset, source_tokenizer: Tokenizer,
                    target_tokenizer: Tokenizer, config: PipelineConfig,
                    include_text: bool = False) -> tf.data.Dataset:
  """String pairs -> batches (of ``tokenize_batch``) of ragged model inputs."""
  def encode(sources, targets):
    target_in, target_out = encode_target(target_tokenizer, targets)
    features = {"source": encode_source(source_tokenizer, sources),
                "target_in": target_in, "target_out": target_out}
    if include_text:
      features.update(source_text=sources, target_text=targets)
    return features
  return pairs.batch(config.tokenize_batch).map(encode, num_parallel_calls=_AUTOTUNE,
                                                deterministic=True)


def filter_stats(split: Split, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                 config: PipelineConfig, name: str = "train") -> FilterStats:
  """Counts what the training filters remove (one tokenization pass), logs it, and
  raises ``DataError`` when nothing is left."""
  source_lengths, target_lengths = [], []
  for batch in encode_batches(as_dataset(split), source_tokenizer, target_tokenizer,
                               config):
    source_lengths.append(batch["source"].row_lengths().numpy() - 1)
    target_lengths.append(batch["target_out"].row_lengths().numpy() - 1)
  src = np.concatenate(source_lengths) if source_lengths else np.zeros([0], np.int64)
  tgt = np.concatenate(target_lengths) if target_lengths else np.zeros([0], np.int64)
  empty = (src == 0) | (tgt == 0)
  no_limit = np.zeros_like(empty)
  src_long = (~empty & (src > config.max_source_len)) if config.max_source_len else no_limit
  tgt_long = ((~empty & ~src_long & (tgt > config.max_target_len))
              if config.max_target_len else no_limit)  # counted once, under source first
  stats = FilterStats(total=len(src), empty=int(empty.sum()),
                      source_too_long=int(src_long.sum()),
                      target_too_long=int(tgt_long.sum()),
                      kept=int((~empty & ~src_long & ~tgt_long).sum()),
                      longest_source=int(src.max(initial=0)),
                      longest_target=int(tgt.max(initial=0)))
  logging.info("%s: kept %d of %d pairs; skipped %d with an empty side, %d with source "
               "> %d tokens, %d with target > %d tokens.", name, stats.kept, stats.total,
               stats.empty, stats.source_too_long, config.max_source_len,
               stats.target_too_long, config.max_target_len)
  if stats.kept == 0:
    if stats.total == stats.empty:
      raise DataError(f"Empty corpus: all {stats.total} pairs of split {name!r} have an "
                      f"empty side after tokenization; check the corpus files.")
    raise DataError(
        f"Empty corpus after filtering: the length filter (max_source_len="
        f"{config.max_source_len}, max_target_len={config.max_target_len}) removed all "
        f"{stats.total - stats.empty} non-empty pairs of split {name!r} (longest source "
        f"{stats.longest_source}, target {stats.longest_target} tokens); raise "
        f"max_source_len/max_target_len or set them to 0 to disable the filter.")
  return stats


def bucket_sizes(max_length: int, config: PipelineConfig) -> Tuple[List[int], List[int]]:
  """Bucket boundaries and batch sizes for ``bucket_by_sequence_length``.

  Bucket ``i`` holds lengths in ``[boundaries[i-1], boundaries[i])``, so its batches are
  at most ``boundaries[i] - 1`` long and ``batch_tokens // (boundaries[i] - 1)`` pairs
  keep them under the budget. ``max_length`` (EOS included) is the longest element.
  """
  boundaries = list(range(config.bucket_width + 1, max_length + 1, config.bucket_width))
  boundaries.append(max_length + 1)
  if config.batch_size:
    sizes = [config.batch_size] * len(boundaries)
  else:
    if config.batch_tokens < max_length:
      raise DataError(
          f"Received batch_tokens={config.batch_tokens}, less than the longest training "
          f"pair ({max_length} tokens with EOS); raise batch_tokens or lower "
          f"max_source_len/max_target_len.")
    sizes = [config.batch_tokens // (b - 1) for b in boundaries]
  return boundaries, sizes + [1]  # the last bucket, >= max_length + 1, stays empty


def train_limits(split: Split, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                 config: PipelineConfig, check: bool) -> Tuple[int, int]:
  """(longest source, longest target) a training batch may hold, EOS not counted: the length
  limits, or the longest pairs of the split when a limit is 0 and ``check`` counts them.

  Raises:
    DataError: nothing is left after filtering (``check``), or token batching without
      limits and without ``check``.
  """
  stats = filter_stats(split, source_tokenizer, target_tokenizer, config) if check else None
  if stats is not None:
    return (config.max_source_len or stats.longest_source,
            config.max_target_len or stats.longest_target)
  if 0 in (config.max_source_len, config.max_target_len) and not config.batch_size:
    raise DataError("Token-based batching of an unchecked corpus needs max_source_len "
                    "and max_target_len > 0 (or batch_size > 0, or check=True).")
  return config.max_source_len, config.max_target_len


def train_batches(pairs: tf.data.Dataset, source_tokenizer: Tokenizer,
                  target_tokenizer: Tokenizer, config: PipelineConfig,
                  limits: Tuple[int, int], buffer: int, seed, cache: bool = False
                  ) -> tf.data.Dataset:
  """String pairs -> tokenized, length-filtered, shuffled, bucketed batches.

  Args:
    pairs: ``(source, target)`` strings.
    source_tokenizer, target_tokenizer: the tokenizers.
    config: filter and batching options.
    limits: ``train_limits``; the longest bucket holds ``max(limits) + 1`` tokens.
    buffer: shuffle buffer (pairs); at least the number of pairs shuffles them all.
    seed: shuffling seed, a Python int or an int64 scalar tensor; with
      ``config.subword_alpha`` > 0 it also seeds the segmentations drawn for all the pairs
      (``subword_sampling.py``), which then are not cached.
    cache: keep the filtered pairs in memory after the first iteration.
  """
  if config.subword_alpha > 0:  # segmentations drawn anew, so not cached
    rows = subword_sampling.sampled_rows(pairs, source_tokenizer, target_tokenizer, config,
                                         seed)
    cache = False
  else:
    rows = encode_batches(pairs, source_tokenizer, target_tokenizer, config).unbatch()
  return bucketed(rows, config, limits, buffer, seed, cache)


def bucketed(rows: tf.data.Dataset, config: PipelineConfig, limits: Tuple[int, int],
             buffer: int, seed, cache: bool = False) -> tf.data.Dataset:
  """The model inputs of single pairs (``encode_batches`` unbatched, or drawn) ->
  length-filtered, shuffled, bucketed batches (``train_batches``'s arguments)."""
  max_src, max_tgt = limits

  def keep(ex):
    src_len = tf.size(ex["source"]) - 1
    tgt_len = tf.size(ex["target_out"]) - 1
    ok = tf.logical_and(src_len > 0, tgt_len > 0)
    if max_src:
      ok = tf.logical_and(ok, src_len <= max_src)
    if max_tgt:
      ok = tf.logical_and(ok, tgt_len <= max_tgt)
    return ok

  # Unbatched ragged rows have a RaggedTensorSpec of ragged_rank 0 that padded_batch
  # refuses; tf.identity turns them into plain tensors.
  ds = rows.map(lambda ex: {k: tf.identity(v) for k, v in ex.items()})
  ds = ds.filter(keep)
  if cache:
    ds = ds.cache()
  ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
  boundaries, sizes = bucket_sizes(max(limits) + 1, config)
  return ds.bucket_by_sequence_length(
      lambda ex: tf.maximum(tf.size(ex["source"]), tf.size(ex["target_out"])),
      bucket_boundaries=boundaries, bucket_batch_sizes=sizes)
