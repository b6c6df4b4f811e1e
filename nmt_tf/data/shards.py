"""A training split read shard by shard through tf.data, never held in memory.

``ParallelShards`` is a split of one or more shards: a pair of line-aligned text files (plain
or gzipped, ``TextLineDataset``), or one TFDS record file holding both sides. Text shards are
checked once in a streaming pass (``text_files.scan_lines``: UTF-8, line endings, equal line
counts) when first needed, so that bad data is a ``DataError`` before training but a command
that never reads the train split (evaluate) does not pay for it; the pass gives each shard's
line count, from which ``stream_order.py`` cuts the pieces that it shuffles and resumes by
position. Counts recorded with the files' SHA-256 (a run's corpus fingerprint) can stand in
for the pass (``assume_lines``). Pairs are stripped as ``decode_line`` strips them (Python's
whitespace) and pairs with an empty side are dropped, in the graph, so that a split streamed
from files gives the pairs, in the order, that ``read_parallel`` gives.
"""

import concurrent.futures
import dataclasses
import glob
import os
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from nmt_tf.data.errors import DataError
from nmt_tf.data.text_files import is_gzip, scan_lines

# The characters Python's str.strip() removes (str.isspace), for RE2.
_SPACE = (r"\t\n\x{0B}\x{0C}\r\x{1C}-\x{1F} \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}"
          r"\x{2029}\x{202F}\x{205F}\x{3000}")
_STRIP_RE2 = f"^[{_SPACE}]+|[{_SPACE}]+$"

# (shard index, first line, line count) -> dataset of raw (source, target) strings.
Reader = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class Shard:
  """One unit of a split: a pair of text files, or a record file with both sides.

  Attributes:
    source: source text file, or the record file.
    target: target text file ("" for a record file).
    lines: lines (pairs, empty ones included) of the shard.
  """
  source: str
  target: str
  lines: int


@dataclasses.dataclass(frozen=True, eq=False)
class ParallelShards:
  """A streamed split (see module docstring).

  Attributes:
    count: returns the shards, in corpus order, with their line counts (checking the files
      first, for text shards); called once, when first needed.
    read: ``read(shard, start, count)`` -> raw ``(source, target)`` string pairs of lines
      ``[start, start + count)`` of shard ``shard`` (int64 scalar tensors).
    name: where the pairs come from, for messages.
    paths: the files whose bytes are the corpus (fingerprinted by a run), empty when the
      source is recorded by name only (TFDS).
  """
  count: Callable[[], Tuple[Shard, ...]]
  read: Reader
  name: str = ""
  paths: Tuple[str, ...] = ()
  _cache: dict = dataclasses.field(default_factory=dict, repr=False)

  @property
  def shards(self) -> Tuple[Shard, ...]:
    """The shards with their line counts (see ``count``)."""
    if "shards" not in self._cache:
      self._cache["shards"] = self.count()
    return self._cache["shards"]

  @property
  def counted(self) -> bool:
    """Whether the line counts are known (checked or assumed)."""
    return "shards" in self._cache

  def assume_lines(self, lines: Sequence[int]) -> None:
    """Takes the shards' line counts as known instead of checking the files, e.g. counts
    recorded with the SHA-256 of the same bytes."""
    shards = self._cache.get("shards") or self.count_free()
    if len(lines) != len(shards):
      raise DataError(f"Received {len(lines)} line counts for {len(shards)} shards.")
    self._cache["shards"] = tuple(dataclasses.replace(s, lines=int(n))
                                  for s, n in zip(shards, lines))

  def count_free(self) -> Tuple[Shard, ...]:
    """The shards with unknown (-1) line counts, without reading the files."""
    pairs = list(zip(self.paths[0::2], self.paths[1::2]))
    return tuple(Shard(src, tgt, -1) for src, tgt in pairs)

  @property
  def lines(self) -> int:
    """Lines of all shards (pairs with an empty side included)."""
    return sum(shard.lines for shard in self.shards)

  def __len__(self) -> int:
    """Pairs with two non-empty sides, counted in one streaming pass (then remembered)."""
    if "pairs" not in self._cache:
      self._cache["pairs"] = int(self.batches().reduce(
          tf.constant(0, tf.int64), lambda n, batch: n + tf.size(batch[0], tf.int64)))
    return self._cache["pairs"]

  def dataset(self) -> tf.data.Dataset:
    """Every pair with two non-empty sides, stripped, in corpus order."""
    return self.batches().unbatch()

  def batches(self, size: int = 4096) -> tf.data.Dataset:
    """``dataset()`` in batches ``(sources [n], targets [n])``, n <= ``size``."""
    return clean_batches(self.raw(), size)

  def raw(self) -> tf.data.Dataset:
    """Every line pair as read, empty ones included, in corpus order."""
    shards = tf.data.Dataset.range(len(self.shards))
    counts = tf.constant([s.lines for s in self.shards], tf.int64)
    return shards.flat_map(lambda i: self.read(i, tf.constant(0, tf.int64), counts[i]))

  def as_numpy_iterator(self) -> Iterator[Tuple[bytes, bytes]]:
    """``(source, target)`` UTF-8 byte pairs in corpus order, as a tf.data split gives them."""
    return self.dataset().as_numpy_iterator()

  @property
  def sources(self) -> List[str]:
    """Every source sentence, read into memory (for small corpora and tools needing lists)."""
    return self._texts()[0]

  @property
  def targets(self) -> List[str]:
    """Every target sentence, read into memory."""
    return self._texts()[1]

  def _texts(self) -> Tuple[List[str], List[str]]:
    if "texts" not in self._cache:
      sources, targets = [], []
      for source_batch, target_batch in self.batches().as_numpy_iterator():
        sources.extend(s.decode("utf-8") for s in source_batch)
        targets.extend(t.decode("utf-8") for t in target_batch)
      self._cache["texts"] = (sources, targets)
    return self._cache["texts"]


def strip(strings: tf.Tensor) -> tf.Tensor:
  """Strips what Python's ``str.strip()`` strips (Unicode whitespace), in the graph."""
  return tf.strings.regex_replace(strings, _STRIP_RE2, "")


def clean_batches(pairs: tf.data.Dataset, batch: int = 1024) -> tf.data.Dataset:
  """Raw string pairs -> batches ``(sources [n], targets [n])`` of the stripped pairs with two
  non-empty sides (order kept; n <= ``batch``)."""
  return pairs.batch(batch).map(_clean)


def _clean(sources, targets, chosen=None):
  """Stripped ``sources``/``targets`` [n] where both sides are non-empty (and ``chosen``)."""
  sources, targets = strip(sources), strip(targets)
  keep = tf.logical_and(tf.strings.length(sources) > 0, tf.strings.length(targets) > 0)
  if chosen is not None:
    keep = tf.logical_and(keep, chosen)
  return tf.boolean_mask(sources, keep), tf.boolean_mask(targets, keep)


def clean_pairs(pairs: tf.data.Dataset, batch: int = 1024) -> tf.data.Dataset:
  """Raw string pairs -> stripped pairs with two non-empty sides (order kept)."""
  return clean_batches(pairs, batch).unbatch()


def expand_paths(spec: str, role: str) -> List[str]:
  """File paths of a ``train_src``-like option: a path, a glob pattern (``train.*.de.gz``,
  sorted) or comma-separated paths/patterns.

  Raises:
    DataError: a pattern matches no file.
  """
  paths = []
  for part in (p.strip() for p in spec.split(",")):
    if not part:
      continue
    if glob.has_magic(part):
      matches = sorted(glob.glob(part))
      if not matches:
        raise DataError(f"{role} pattern {part!r} matches no file; check the path.")
      paths.extend(matches)
    else:
      paths.append(part)
  return paths


def _text_reader(sources: Sequence[str], targets: Sequence[str],
                 gzipped: Sequence[Tuple[bool, bool]]) -> Reader:
  source_t = tf.constant(list(sources))
  target_t = tf.constant(list(targets))
  kinds = tf.constant([["GZIP" if g else "" for g in pair] for pair in gzipped])  # [shards, 2]

  def read(shard, start, count):
    # Each side read ahead by its own thread: the two skips to `start` run in parallel.
    sides = [tf.data.TextLineDataset(tf.gather(paths, shard), kinds[shard, side])
             .skip(start).take(count).prefetch(256)
             for side, paths in enumerate((source_t, target_t))]
    return tf.data.Dataset.zip(tuple(sides))
  return read


def open_text_shards(source_paths: Sequence[str], target_paths: Sequence[str],
                     name: Optional[str] = None) -> ParallelShards:
  """Opens line-aligned files as a streamed split; their check waits for the first use.

  Args:
    source_paths: the source file of each shard.
    target_paths: the target file of each shard, as many.
    name: label for messages; defaults to the first source file's name.

  Raises:
    DataError: unequal numbers of files, or a missing file; when the line counts are first
      needed, a bad file (``scan_lines``), line counts that differ within a shard, or no
      line at all.
  """
  if len(source_paths) != len(target_paths) or not source_paths:
    raise DataError(f"Received {len(source_paths)} source and {len(target_paths)} target "
                    f"files; pass the same number (>= 1) of each, shard i of one side aligned "
                    f"with shard i of the other.")
  files = [p for pair in zip(source_paths, target_paths) for p in pair]
  roles = ["source", "target"] * len(source_paths)
  for path, role in zip(files, roles):
    if not os.path.isfile(path):
      scan_lines(path, role)  # raises the missing-file error

  def count():
    # Both sides (and shards) are checked in parallel: zlib and file reads release the GIL.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
      lines = [n for n, _ in pool.map(scan_lines, files, roles)]
    shards = []
    for i, (src, tgt) in enumerate(zip(source_paths, target_paths)):
      if lines[2 * i] != lines[2 * i + 1]:
        raise DataError(
            f"Line counts differ: source {src} has {lines[2 * i]} lines, target {tgt} has "
            f"{lines[2 * i + 1]} lines; the files must be line-aligned (one sentence pair per "
            f"line), fix or re-extract them.")
      shards.append(Shard(src, tgt, lines[2 * i]))
    if not sum(s.lines for s in shards):
      raise DataError(f"Empty corpus: {', '.join(files)} have no line; check that these "
                      f"are the right files.")
    return tuple(shards)

  gzipped = [(is_gzip(src), is_gzip(tgt)) for src, tgt in zip(source_paths, target_paths)]
  return ParallelShards(count, _text_reader(source_paths, target_paths, gzipped),
                        name=name or os.path.basename(source_paths[0]), paths=tuple(files))


def sample_indices(total: int, limit: Optional[int], seed: int) -> Optional[np.ndarray]:
  """Sorted indices of a seeded uniform sample of ``limit`` of ``total`` items, or None when
  every item is kept (``limit`` is 0/None or not below ``total``)."""
  if not limit or limit >= total:
    return None
  rng = np.random.default_rng([seed, total, limit])
  return np.sort(rng.choice(total, size=limit, replace=False))


def sample_pairs(split: ParallelShards, limit: Optional[int],
                 seed: int = 0) -> Iterator[Tuple[str, str]]:
  """A seeded uniform sample of ``limit`` lines of a streamed split, read in one pass.

  The same (split, limit, seed) gives the same pairs, in corpus order; pairs with an empty
  side among the sampled lines are dropped. ``limit`` >= the split's lines gives every pair.
  """
  chosen = sample_indices(split.lines, limit, seed)
  if chosen is None:
    batches = split.batches()
  else:
    keep = np.zeros([split.lines], bool)
    keep[chosen] = True
    keep_t = tf.constant(keep)
    size = 4096

    def sampled(index, lines):  # batch `index` of `size` lines
      first = index * size
      return _clean(*lines, keep_t[first:first + tf.shape(lines[0], tf.int64)[0]])
    batches = split.raw().batch(size).enumerate().map(sampled)
  for sources, targets in batches.prefetch(1).as_numpy_iterator():
    for s, t in zip(sources, targets):
      yield s.decode("utf-8"), t.decode("utf-8")
