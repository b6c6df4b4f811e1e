"""tf.data pipelines from raw sentence pairs to the batches of docs/DESIGN.md
(``batching.py``): training batches filtered by length, shuffled under a seed and bucketed,
an in-memory or tf.data corpus as a whole, a streamed one piece by piece
(``stream_order.py``); evaluation batches keep every pair, in order.
"""

import dataclasses
from typing import Any, Dict, Optional

import tensorflow as tf

from nmt_tf.data.batching import (as_dataset, encode_batches, PipelineConfig, Split,
                                  train_batches, train_limits)
from nmt_tf.data.shards import ParallelShards
from nmt_tf.data.stream_order import StreamOrder
from nmt_tf.data.text_files import ParallelText
from nmt_tf.data.tokenizer import Tokenizer

_AUTOTUNE = tf.data.AUTOTUNE


def make_train_dataset(split: Split, source_tokenizer: Tokenizer,
                       target_tokenizer: Tokenizer, config: PipelineConfig,
                       check: Optional[bool] = None,
                       cache: Optional[bool] = None) -> tf.data.Dataset:
  """Shuffled, length-filtered, bucketed training batches (one epoch per iteration).

  Args:
    split: ``ParallelText``, ``ParallelShards`` or ``tf.data.Dataset`` of ``(source,
      target)`` strings. A ``ParallelShards`` split gives one epoch of ``stream_order.py``
      (shuffled piece by piece).
    source_tokenizer: tokenizer of the source side.
    target_tokenizer: tokenizer of the target side.
    config: batching options.
    check: count what the filters remove (one extra tokenization pass) and raise when
      nothing is left; default: for in-memory corpora, and for streamed ones without both
      length limits (which then fix the longest pair).
    cache: keep the tokenized pairs in memory after the first epoch; default: for
      in-memory corpora.

  Returns:
    A dataset of dicts ``source``, ``target_in``, ``target_out`` (int32, padded with 0).
  """
  in_memory = isinstance(split, ParallelText)
  if isinstance(split, ParallelShards):
    order = StreamOrder(split, source_tokenizer, target_tokenizer, config, check=check)
    return order.epoch(0)
  check = in_memory if check is None else check
  cache = in_memory if cache is None else cache
  limits = train_limits(split, source_tokenizer, target_tokenizer, config, check)
  buffer = config.shuffle_buffer or (len(split) if in_memory else 100_000)
  ds = train_batches(as_dataset(split), source_tokenizer, target_tokenizer, config, limits,
                     buffer, config.seed, cache)
  options = tf.data.Options()
  options.deterministic = True
  return ds.with_options(options).prefetch(_AUTOTUNE)


def make_eval_dataset(split: Split, source_tokenizer: Tokenizer,
                      target_tokenizer: Tokenizer, config: PipelineConfig,
                      include_text: bool = False) -> tf.data.Dataset:
  """Every pair, in corpus order, in batches of ``eval_batch_size`` (no length filter).

  Args:
    split: ``ParallelText`` or ``tf.data.Dataset`` of ``(source, target)`` strings.
    source_tokenizer: tokenizer of the source side.
    target_tokenizer: tokenizer of the target side.
    config: ``reverse_source`` and ``eval_batch_size`` are used.
    include_text: add ``source_text`` and ``target_text`` (tf.string [batch]), the raw
      sentences, e.g. as BLEU references.

  Returns:
    A dataset of dicts like ``make_train_dataset``'s (plus the texts when asked).
  """
  eval_config = dataclasses.replace(config, tokenize_batch=config.eval_batch_size)
  ds = encode_batches(as_dataset(split), source_tokenizer, target_tokenizer,
                       eval_config, include_text)

  def to_dense(ex: Dict[str, Any]) -> Dict[str, tf.Tensor]:
    return {k: v.to_tensor() if isinstance(v, tf.RaggedTensor) else v
            for k, v in ex.items()}
  return ds.map(to_dense).prefetch(_AUTOTUNE)
