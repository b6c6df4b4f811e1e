"""The training order of a streamed split: pieces, epochs, workers and resumable positions.

Every shard of a ``ParallelShards`` split is cut into pieces of consecutive lines, as many
pairs as the shuffle buffer holds (``PipelineConfig.shuffle_buffer``, default
``DEFAULT_PIECE_PAIRS``). Epoch ``e`` visits a worker's pieces in a random order drawn
from ``(pipeline.seed, e)`` (stateless, so it follows from the seed alone); each piece is read
(``skip(start).take(lines)``, no tokenization of the lines skipped), stripped, tokenized,
length-filtered, shuffled whole under seed ``pipeline.seed + e + PIECE_SEED_STRIDE * piece``
and bucketed (``batching.train_batches``). A piece's batches never mix with another's, so a
position in the stream is (epoch, batch of the epoch, piece in the epoch's order, batch of the
piece), and a run resumed there reads the lines of that one piece again, nothing before it.
With subword regularization a piece's segmentations are drawn one piece ahead, while the
batches of the piece before are trained on (``_ahead``). A corpus that fits in one piece is
shuffled whole: its batches are those of ``make_train_dataset`` on the ``ParallelText`` of
the same files, epoch by epoch.

Workers: with at least as many shards as workers, worker ``w`` of ``W`` reads shards ``w, w +
W, ...`` (by file); otherwise it reads every piece, ``W`` times longer, and keeps its lines
``w, w + W, ...`` (by data). Either way it tokenizes only its own part. A worker's stream is
endless, epoch after epoch, so that workers whose parts give different numbers of batches
still run the same steps; each worker's position is its own.
"""

import collections
import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf

from nmt_tf.data import batching
from nmt_tf.data import subword_sampling
from nmt_tf.data.errors import DataError
from nmt_tf.data.shards import clean_pairs, ParallelShards
from nmt_tf.data.tokenizer import Tokenizer

DEFAULT_PIECE_PAIRS = 200_000
PIECE_SEED_STRIDE = 1_000_003
_KEYS = ("source", "target_in", "target_out")


@dataclasses.dataclass(frozen=True)
class StreamPosition:
  """Where a worker's stream is: the next batch to give.

  Attributes:
    epoch: the epoch.
    batch: batches of the epoch given before it.
    piece: index of its piece in the epoch's order.
    batch_in_piece: batches of that piece given before it.
  """
  epoch: int = 0
  batch: int = 0
  piece: int = 0
  batch_in_piece: int = 0

  def as_list(self):
    return [self.epoch, self.batch, self.piece, self.batch_in_piece]


class StreamOrder:
  """Batches of a streamed split for one worker (see module docstring).

  Args:
    split: the ``ParallelShards`` training split.
    source_tokenizer, target_tokenizer: the tokenizers.
    config: ``PipelineConfig``; ``shuffle_buffer`` is the pairs of a piece per worker.
    num_workers, worker: this worker's share.
    check: count what the length filter removes over the whole split first (a tokenization
      pass); default: only when a length limit is 0 (it then fixes the longest pair).

  Raises:
    DataError: this worker has no line to read, or token batching without length limits
      and without the check.
  """

  def __init__(self, split: ParallelShards, source_tokenizer: Tokenizer,
               target_tokenizer: Tokenizer, config: batching.PipelineConfig,
               num_workers: int = 1, worker: int = 0, check: Optional[bool] = None):
    self.split = split
    self.source_tokenizer = source_tokenizer
    self.target_tokenizer = target_tokenizer
    self.config = config
    self.num_workers = num_workers
    self.worker = worker
    self.buffer = config.shuffle_buffer or DEFAULT_PIECE_PAIRS
    shards = range(len(split.shards))
    self.by_data = num_workers > 1 and len(split.shards) < num_workers
    if num_workers > 1 and not self.by_data:
      shards = shards[worker::num_workers]
    piece_lines = self.buffer * (num_workers if self.by_data else 1)
    self.pieces = np.array([(s, start, min(piece_lines, split.shards[s].lines - start))
                            for s in shards
                            for start in range(0, split.shards[s].lines, piece_lines)],
                           np.int64).reshape([-1, 3])  # [pieces, (shard, start, lines)]
    if not len(self.pieces):
      raise DataError(f"Worker {worker} of {num_workers} has nothing to read in "
                      f"{split.name!r} ({split.lines} lines in {len(split.shards)} shards); "
                      f"give the corpus more lines or use fewer workers.")
    if check is None:
      check = 0 in (config.max_source_len, config.max_target_len)
    self.limits = batching.train_limits(split, source_tokenizer, target_tokenizer, config,
                                        check)
    self._seen = collections.deque()  # the meta of every batch given, from _first
    self._first = 0
    self._start = StreamPosition()

  @property
  def num_pieces(self) -> int:
    return len(self.pieces)

  def piece_order(self, epoch) -> tf.Tensor:
    """int64 [pieces]: the pieces of epoch ``epoch`` in the order they are read."""
    count = self.num_pieces
    if count == 1:
      return tf.zeros([1], tf.int64)
    seed = tf.stack([tf.constant(self.config.seed, tf.int64), tf.cast(epoch, tf.int64)])
    keys = tf.random.stateless_uniform([count], seed=seed)
    return tf.cast(tf.argsort(keys), tf.int64)

  def _piece_pairs(self, piece):
    """The string pairs of piece ``piece`` (a row of ``self.pieces``)."""
    pieces = tf.constant(self.pieces)
    shard, start, lines = pieces[piece, 0], pieces[piece, 1], pieces[piece, 2]
    raw = self.split.read(shard, start, lines)
    if self.by_data:
      raw = raw.shard(self.num_workers, self.worker)
    return clean_pairs(raw)

  def _piece_seed(self, epoch, piece):
    """The seed that shuffles (and draws) piece ``piece`` in epoch ``epoch``."""
    return self.config.seed + epoch + PIECE_SEED_STRIDE * piece

  def _piece_batches(self, epoch, index, *drawn) -> tf.data.Dataset:
    """The batches of the piece at ``index`` of epoch ``epoch``'s order; with subword
    regularization, from the piece's ``drawn`` segmentations (``_ahead``)."""
    piece = self.piece_order(epoch)[index]
    seed = self._piece_seed(epoch, piece)
    if not drawn:
      return batching.train_batches(self._piece_pairs(piece), self.source_tokenizer,
                                    self.target_tokenizer, self.config, self.limits,
                                    self.buffer, seed)
    rows = subword_sampling.model_inputs(subword_sampling.pair_slices(drawn), self.config)
    return batching.bucketed(rows, self.config, self.limits, self.buffer, seed)

  def _ahead(self, schedule: tf.data.Dataset) -> tf.data.Dataset:
    """``(epoch, index)`` of the pieces to read -> the same, with subword regularization
    followed by the piece's drawn segmentations (``subword_sampling.draw_all``, source and
    target ids). The draw, the longest stage of a piece's batches, is made one piece ahead
    (prefetch), while the batches of the piece before are trained on; a draw is a function
    of its seed, so the batches are the same."""
    if self.config.subword_alpha <= 0:
      return schedule

    def with_draw(epoch, index):
      piece = self.piece_order(epoch)[index]
      return (epoch, index) + subword_sampling.draw_all(
          self._piece_pairs(piece), self.source_tokenizer, self.target_tokenizer,
          self.config.subword_alpha, self.config.subword_nbest, self._piece_seed(epoch, piece))

    return schedule.map(with_draw).prefetch(1)

  def epoch(self, epoch: int) -> tf.data.Dataset:
    """The batches of one epoch (a finite dataset), for ``make_train_dataset``."""
    schedule = tf.data.Dataset.range(self.num_pieces).map(
        lambda i: (tf.constant(epoch, tf.int64), i))
    return _finish(self._ahead(schedule).flat_map(self._piece_batches))

  def stream(self, position: StreamPosition = StreamPosition(),
             skip: int = 0) -> tf.data.Dataset:
    """The endless stream of batches from ``position`` (then ``skip`` more batches);
    ``position(consumed)`` then tells where the stream is after ``consumed`` batches.

    The stream ends only when an epoch gives no batch (every pair filtered out).
    """
    count = self.num_pieces
    e0, b0, p0, j0 = position.as_list()
    if not 0 <= p0 < count:
      raise DataError(f"Received a stream position in piece {p0}; the split has {count} "
                      f"pieces for this worker (the corpus or shuffle_buffer changed?).")
    schedule = tf.data.Dataset.range(e0, np.iinfo(np.int64).max).flat_map(
        lambda e: tf.data.Dataset.range(count).map(lambda i: (e, i))).skip(p0)
    end = {key: tf.zeros([0, 0], tf.int32) for key in _KEYS}

    def piece(e, i, *drawn):
      first = tf.logical_and(tf.equal(e, e0), tf.equal(i, p0))
      skip_here = tf.where(first, tf.constant(j0, tf.int64), 0)
      batches = self._piece_batches(e, i, *drawn).enumerate().skip(skip_here)
      batches = batches.map(lambda j, batch: (batch, tf.stack([e, i, j])))
      # After the epoch's last piece, a marker with piece -1 (see count below).
      marker = tf.data.Dataset.from_tensors((end, tf.stack([e, -1, -1])))
      return batches.concatenate(marker.take(tf.cast(tf.equal(i, count - 1), tf.int64)))

    def count_in_epoch(n, element):
      batch, meta = element
      is_marker = tf.less(meta[1], 0)
      go_on = tf.logical_or(tf.logical_not(is_marker), n > 0)  # an empty epoch ends it
      return (tf.where(is_marker, tf.constant(0, tf.int64), n + 1),
              (batch, tf.concat([meta, [n]], 0), go_on, is_marker))

    ds = self._ahead(schedule).flat_map(piece).scan(tf.constant(b0, tf.int64), count_in_epoch)
    ds = ds.take_while(lambda batch, meta, go_on, marker: go_on)
    ds = ds.filter(lambda batch, meta, go_on, marker: tf.logical_not(marker))
    ds = ds.skip(skip)
    self._seen.clear()
    self._first = 0
    self._start = position if not skip else None
    return _finish(ds.map(lambda batch, meta, go_on, marker: self._note(batch, meta)))

  def _note(self, batch, meta):
    """Records the position of a batch given (meta: epoch, piece, batch in piece, batch in
    epoch) and passes the batch on. A py_function: the stream runs in this process."""
    done = tf.py_function(self._append, [meta], tf.int64)
    with tf.control_dependencies([done]):
      return {key: tf.identity(value) for key, value in batch.items()}

  def _append(self, meta):
    self._seen.append(tuple(int(v) for v in meta.numpy()))
    return 0

  def position(self, consumed: int) -> Optional[StreamPosition]:
    """The position after the first ``consumed`` batches of the last ``stream()``; None
    before its first batch when it began with a ``skip``."""
    if consumed <= 0:
      return self._start
    while self._first < consumed - 1 and self._seen:
      self._seen.popleft()
      self._first += 1
    if self._first != consumed - 1 or not self._seen:
      raise ValueError(f"Batch {consumed} of the stream was not given yet (or was already "
                       f"forgotten); position() follows the batches consumed.")
    epoch, piece, in_piece, in_epoch = self._seen[0]
    return StreamPosition(epoch, in_epoch + 1, piece, in_piece + 1)


def _finish(ds: tf.data.Dataset) -> tf.data.Dataset:
  options = tf.data.Options()
  options.deterministic = True
  return ds.with_options(options).prefetch(tf.data.AUTOTUNE)
