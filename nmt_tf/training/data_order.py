"""Reproducible training batch order that a restarted run can resume exactly.

Epoch e is `make_train_dataset` shuffled under seed `pipeline.seed + e`, so the order of every
epoch follows from the seed alone; a run restored at (epoch, batch) rebuilds that epoch and
skips the batches it had already consumed. With several workers each keeps every
num_workers-th batch of the epoch (cut to a multiple of num_workers, so that every worker runs
the same number of steps).
"""

import dataclasses

import tensorflow as tf

from nmt_tf import data


class BatchOrder:
  """Training batches by epoch (see module docstring).

  Args:
    split: the training ParallelText (or tf.data.Dataset of string pairs).
    source_tokenizer, target_tokenizer: the run's tokenizers.
    pipeline_config: nmt_tf.data.PipelineConfig.
    num_shards, shard_index: this worker's share of every epoch.
  """

  def __init__(self, split, source_tokenizer, target_tokenizer, pipeline_config,
               num_shards=1, shard_index=0):
    self.split = split
    self.source_tokenizer = source_tokenizer
    self.target_tokenizer = target_tokenizer
    self.pipeline_config = pipeline_config
    self.num_shards = num_shards
    self.shard_index = shard_index
    self._checked = False

  def epoch(self, epoch, skip=0):
    """The batches of epoch `epoch` for this worker, without its first `skip` batches."""
    config = dataclasses.replace(self.pipeline_config, seed=self.pipeline_config.seed + epoch)
    # The filter counts are checked once; later epochs skip that pass when the length limits
    # are explicit (they then fix the bucket boundaries on their own).
    limits_set = config.max_source_len > 0 and config.max_target_len > 0
    check = not (self._checked and limits_set)
    ds = data.make_train_dataset(self.split, self.source_tokenizer, self.target_tokenizer,
                                 config, check=check, cache=False)
    self._checked = True
    if self.num_shards > 1:
      count = int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))
      ds = ds.take(count - count % self.num_shards).shard(self.num_shards, self.shard_index)
    if skip:
      ds = ds.skip(skip)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options)
