"""Reproducible training batch order that a restarted run can resume exactly.

In-memory splits: epoch e is `make_train_dataset` shuffled under seed `pipeline.seed + e`, so
the order of every epoch follows from the seed alone; a run restored at (epoch, batch) rebuilds
that epoch and skips the batches it had already consumed. With several workers each keeps
every num_workers-th batch of the epoch (cut to a multiple of num_workers, so that every
worker runs the same number of steps).

Streamed splits (`data.ParallelShards`): each worker reads its own part as an endless stream
(`data.StreamOrder`: pieces shuffled one at a time, epoch after epoch). The checkpoint keeps
every worker's position in its stream (epoch, batch of the epoch, piece, batch of the piece),
gathered from the workers at each save, as JSON in the `data_position` state; a restored run
starts each worker's stream at its piece, reading the lines of that piece only. Without a
saved position (a checkpoint written by an in-memory run of the same files, or with another
number of workers, pieces or piece size) the run starts at the saved (epoch, batch) and skips
the batches before it.
"""

import dataclasses
import json

from absl import logging
import numpy as np
import tensorflow as tf

from nmt_tf import data
from nmt_tf.data import captions
from nmt_tf.data import subword_sampling


def batch_order(split, source_tokenizer, target_tokenizer, pipeline_config, num_workers=1,
                worker=0):
  """The batch order of a training split: a StreamedOrder for a `data.ParallelShards`, an
  InMemoryOrder otherwise.

  Args:
    split: the training ParallelText, ParallelShards or tf.data.Dataset of string pairs.
    source_tokenizer, target_tokenizer: the run's tokenizers.
    pipeline_config: nmt_tf.data.PipelineConfig.
    num_workers, worker: this worker's share of every epoch.
  """
  if pipeline_config.subword_alpha > 0:
    subword_sampling.check_tokenizers(source_tokenizer, target_tokenizer)
  cls = StreamedOrder if isinstance(split, data.ParallelShards) else InMemoryOrder
  return cls(split, source_tokenizer, target_tokenizer, pipeline_config, num_workers, worker)


class InMemoryOrder:
  """Epoch e of an in-memory split: the bucketed batches shuffled under pipeline.seed + e,
  every num_workers-th of them for this worker (see the module docstring)."""

  def __init__(self, split, source_tokenizer, target_tokenizer, pipeline_config,
               num_workers=1, worker=0):
    self.split = split
    self.source_tokenizer = source_tokenizer
    self.target_tokenizer = target_tokenizer
    self.pipeline_config = pipeline_config
    self.num_workers = num_workers
    self.worker = worker
    self._checked = False

  def epoch(self, epoch, skip=0, saved=""):
    """The batches of epoch `epoch` for this worker, without its first `skip` batches."""
    del saved  # the epoch and the batch say where an in-memory split stood
    config = dataclasses.replace(self.pipeline_config, seed=self.pipeline_config.seed + epoch)
    # The filter counts are checked once; later epochs skip that pass when the length limits
    # are explicit (they then fix the bucket boundaries on their own).
    limits_set = config.max_source_len > 0 and config.max_target_len > 0
    check = not (self._checked and limits_set)
    ds = data.make_train_dataset(self.split, self.source_tokenizer, self.target_tokenizer,
                                 config, check=check, cache=False)
    self._checked = True
    return worker_share(ds, self.num_workers, self.worker, skip)

  def position(self, consumed, strategy=None):
    """None: the trainer's epoch and batch count are the whole position."""
    del consumed, strategy
    return None


def worker_share(ds, num_workers, worker, skip=0):
  """Every num_workers-th batch of an epoch's batches `ds` from the worker-th (the epoch cut
  to a multiple of num_workers, so that every worker runs the same number of steps), without
  its first `skip`; the strategy's own sharding off."""
  if num_workers > 1:
    count = int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))
    ds = ds.take(count - count % num_workers).shard(num_workers, worker)
  if skip:
    ds = ds.skip(skip)
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
  return ds.with_options(options)


class CaptionOrder:
  """The batch order of a captioning split (data/captions.py): epoch e is the image-caption
  pairs shuffled under seed + e, in batches of batch_size, this worker's share of them; a
  restored run rebuilds its epoch and skips the batches it had consumed.

  Args:
    split: the training data.captions.CaptionSplit.
    tokenizer: the caption tokenizer.
    image_size: side of the resized images.
    batch_size: pairs per batch.
    seed: pipeline.seed.
    max_target_len: longer captions are skipped (0 keeps all).
    num_workers, worker: this worker's share of every epoch.
  """

  def __init__(self, split, tokenizer, image_size, batch_size, seed, max_target_len=0,
               num_workers=1, worker=0):
    self.split, self.tokenizer = split, tokenizer
    self.image_size, self.batch_size = image_size, batch_size
    self.seed, self.max_target_len = seed, max_target_len
    self.num_workers, self.worker = num_workers, worker

  def epoch(self, epoch, skip=0, saved=""):
    """The batches of epoch `epoch` for this worker, without its first `skip` batches."""
    del saved  # the epoch and the batch say where the run stood
    order = np.random.default_rng([self.seed, epoch]).permutation(len(self.split))
    ds = captions.caption_batches(self.split, self.tokenizer, self.image_size,
                                  self.batch_size, order, self.max_target_len)
    return worker_share(ds, self.num_workers, self.worker, skip)

  def position(self, consumed, strategy=None):
    """None: the trainer's epoch and batch count are the whole position."""
    del consumed, strategy
    return None


class StreamedOrder:
  """A streamed split (`data.ParallelShards`) as this worker's endless stream, resumable at
  the position saved with the checkpoint (see the module docstring)."""

  def __init__(self, split, source_tokenizer, target_tokenizer, pipeline_config,
               num_workers=1, worker=0):
    self.num_workers = num_workers
    self.worker = worker
    self.stream = data.StreamOrder(split, source_tokenizer, target_tokenizer,
                                   pipeline_config, num_workers, worker)
    self._base = 0  # the trainer's batch count when the stream began

  def epoch(self, epoch, skip=0, saved=""):
    """The endless stream from `saved` (`position`'s JSON) when it fits, else from batch
    `skip` of epoch `epoch`."""
    self._base = skip
    start = self._saved_position(saved)
    if start is not None:
      return self.stream.stream(start)
    return self.stream.stream(data.StreamPosition(epoch=epoch), skip=skip)

  def _describe(self):
    return {"workers": self.num_workers, "pieces": self.stream.num_pieces,
            "pairs_per_piece": self.stream.buffer}

  def _saved_position(self, saved):
    """This worker's StreamPosition in `saved`, or None when there is none that fits."""
    if not saved:
      return None
    try:
      record = json.loads(saved)
      row = record["positions"][self.worker]
    except (ValueError, KeyError, IndexError, TypeError):
      row, record = None, {}
    if row is None or {k: record.get(k) for k in self._describe()} != self._describe():
      logging.warning("The saved data position (%s) does not fit this corpus and workers "
                      "(%s); starting from the saved epoch and batch instead.", saved[:200],
                      self._describe())
      return None
    return data.StreamPosition(*row)

  def position(self, consumed, strategy=None):
    """What to save after `consumed` batches (the trainer's count, that of `epoch`'s `skip`
    included): (JSON of every worker's position, epoch, batch of the epoch) of this worker;
    None before the first batch of a stream that began with a skip. Every worker must call
    it at the same time (it gathers the rows)."""
    own = self.stream.position(consumed - self._base)
    if own is None:
      return None
    rows = gather_rows(strategy, own.as_list(), self.num_workers, self.worker)
    text = json.dumps({**self._describe(), "positions": rows})
    return text, own.epoch, own.batch


def gather_rows(strategy, row, num_workers, index):
  """Every worker's `row` (a list of ints), from each worker's own: rows of zeros but one,
  summed over the replicas (each worker's local replicas counted once)."""
  if num_workers <= 1:
    return [list(row)]
  matrix = np.zeros([num_workers, len(row)], np.float64)
  matrix[index] = row
  replicas = strategy.num_replicas_in_sync
  per_replica = strategy.run(lambda: tf.constant(matrix) * (num_workers / replicas))
  total = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None).numpy()
  return [[int(round(v)) for v in r] for r in total]
