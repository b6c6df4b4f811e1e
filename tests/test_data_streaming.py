"""Streamed training splits: files and TFDS record files read shard by shard, the order of
pieces and epochs, resume positions, worker parts and the bounded vocabulary sample."""

import dataclasses
import gzip
import os

import numpy as np
import pytest
import tensorflow as tf

from nmt_tf import data

KEYS = ("source", "target_in", "target_out")


def _write(path, lines, gz=False, raw=None):
  content = raw if raw is not None else "".join(line + "\n" for line in lines).encode()
  with (gzip.open if gz else open)(path, "wb") as f:
    f.write(content)
  return path


def _batches(ds, count=None):
  """Batches as comparable tuples of arrays."""
  ds = ds.take(count) if count is not None else ds
  return [tuple(b[k] for k in KEYS) for b in ds.as_numpy_iterator()]


def _assert_same_batches(test, a, b):
  test.assertEqual(len(a), len(b))
  for x, y in zip(a, b):
    for u, v in zip(x, y):
      test.assertAllEqual(u, v)


def _pairs(batches):
  """The source sentences of batches (ids without EOS and padding, as tuples)."""
  return [tuple(row[(row > 3)].tolist()) for batch in batches for row in batch[0]]


@pytest.mark.slow  # streams and trains tokenizers
class StreamedFilesTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.text = data.generate_pairs(300, seed=2)
    cls.src_tok = data.WordTokenizer.build(cls.text.sources)
    cls.tgt_tok = data.WordTokenizer.build(cls.text.targets)

  def _files(self, name, text=None, shards=1, gz=True):
    """`text` written as `shards` line-aligned file pairs; returns (sources, targets)."""
    text = text or self.text
    d = os.path.join(self.get_temp_dir(), name)
    os.makedirs(d, exist_ok=True)
    bounds = np.linspace(0, len(text.sources), shards + 1).astype(int)
    sources, targets = [], []
    for i in range(shards):
      part = slice(bounds[i], bounds[i + 1])
      ext = ".gz" if gz else ""
      sources.append(_write(os.path.join(d, f"train.{i}.src{ext}"), text.sources[part], gz))
      targets.append(_write(os.path.join(d, f"train.{i}.tgt{ext}"), text.targets[part], gz))
    return sources, targets

  def _config(self, **kwargs):
    return data.PipelineConfig(**{"max_source_len": 30, "max_target_len": 30,
                                  "batch_tokens": 256, "seed": 4, **kwargs})

  def test_pairs_equal_read_parallel_whitespace_and_empty_pairs(self):
    d = self.get_temp_dir()
    lines_src = ["\u00a0ein Hund\u3000", "", "  ", "eine Katze\r", "x\t", "\u2009y z \u2028"]
    lines_tgt = ["a dog", "b", "c", " a cat ", "", "\u00a0w\u00a0"]
    src = _write(os.path.join(d, "w.src.gz"), lines_src, gz=True)
    tgt = _write(os.path.join(d, "w.tgt"), None, raw="".join(
        l + "\r\n" for l in lines_tgt).encode())
    listed = data.read_parallel(src, tgt)
    streamed = data.open_text_shards([src], [tgt])
    self.assertEqual(streamed.lines, 6)
    self.assertEqual(streamed.sources, listed.sources)
    self.assertEqual(streamed.targets, listed.targets)
    self.assertLen(streamed, len(listed))

  def test_bad_files_raise_the_errors_of_the_list_path(self):
    d = self.get_temp_dir()
    good = _write(os.path.join(d, "g.tgt"), ["a", "b", "c"])
    cases = [
        (_write(os.path.join(d, "u.src"), None, raw=b"fine\nstill fine\ncaf\xe9\n"),
         r"u\.src line 3: not valid UTF-8"),
        (_write(os.path.join(d, "mac.src"), None, raw=b"a\rb\rc\r"),
         r"mac\.src line 1: old Mac line endings"),
        (_write(os.path.join(d, "cr.src"), None, raw=b"a\nb\rx\nc\n"),
         r"cr\.src line 2: carriage return \(\\r\) at column 2"),
        (_write(os.path.join(d, "short.src"), ["a", "b"]),
         r"source .*short\.src has 2 lines, target .*g\.tgt has 3 lines"),
        (os.path.join(d, "absent.src"), r"source file not found: .*absent\.src"),
        (_write(os.path.join(d, "bad.src.gz"), None, raw=b"\x1f\x8bnot gzip at all"),
         r"bad\.src\.gz: cannot read"),
    ]
    for path, message in cases:
      with self.assertRaisesRegex(data.DataError, message):
        data.open_text_shards([path], [good]).lines  # pylint: disable=expression-not-assigned
    # The files are checked when first needed, not when opened.
    self.assertFalse(data.open_text_shards([cases[0][0]], [good]).counted)
    # A last line without a line break counts, as read_lines counts it.
    last = _write(os.path.join(d, "last.src"), None, raw=b"a\nb\nc")
    self.assertEqual(data.open_text_shards([last], [good]).lines, 3)

  def test_one_piece_equals_the_in_memory_pipeline(self):
    sources, targets = self._files("one")
    split = data.open_text_shards(sources, targets)
    for global_seed in (None, 7):  # the trainer sets one; the data tests do not
      if global_seed is not None:
        tf.random.set_seed(global_seed)
      listed = _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                                self._config(), cache=False))
      streamed = _batches(data.make_train_dataset(split, self.src_tok, self.tgt_tok,
                                                  self._config()))
      _assert_same_batches(self, streamed, listed)
    # The endless stream: epoch e is the in-memory pipeline under seed + e.
    order = data.StreamOrder(split, self.src_tok, self.tgt_tok, self._config())
    second = _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                              self._config(seed=5), cache=False))
    _assert_same_batches(self, _batches(order.stream(), len(listed) + len(second)),
                         listed + second)

  def test_pieces_cover_each_epoch_once_in_a_new_order(self):
    sources, targets = self._files("pieces", shards=2)
    split = data.open_text_shards(sources, targets)
    order = data.StreamOrder(split, self.src_tok, self.tgt_tok, self._config(shuffle_buffer=40))
    self.assertEqual(order.num_pieces, 8)  # 150 lines per shard: 40 + 40 + 40 + 30
    expected = sorted(_pairs(_batches(data.make_train_dataset(
        self.text, self.src_tok, self.tgt_tok, self._config()))))
    epochs = [_batches(order.epoch(e)) for e in (0, 1, 0)]
    for batches in epochs:
      self.assertEqual(sorted(_pairs(batches)), expected)
    self.assertNotEqual(_pairs(epochs[0]), _pairs(epochs[1]))
    _assert_same_batches(self, epochs[0], epochs[2])  # the order follows from the seed
    self.assertNotAllEqual(order.piece_order(0), order.piece_order(1))

  def test_resume_from_a_position_continues_the_stream(self):
    sources, targets = self._files("resume")
    split = data.open_text_shards(sources, targets)
    config = self._config(shuffle_buffer=70)  # 5 pieces
    order = data.StreamOrder(split, self.src_tok, self.tgt_tok, config)
    per_epoch = len(_batches(order.epoch(0)))
    total = 2 * per_epoch + 5
    reference = _batches(order.stream(), total)
    self.assertEqual(order.position(per_epoch).epoch, 0)
    self.assertEqual(order.position(per_epoch + 1), data.StreamPosition(1, 1, 0, 1))
    for consumed in (per_epoch - 1, per_epoch + 7):  # in the last piece; in the next epoch
      stream = order.stream()
      self.assertLen(_batches(stream, consumed), consumed)
      position = order.position(consumed)
      resumed = data.StreamOrder(split, self.src_tok, self.tgt_tok, config)
      _assert_same_batches(self, _batches(resumed.stream(position), total - consumed),
                           reference[consumed:])
    # Without a position: (epoch, batches to skip), the same batches.
    skipped = data.StreamOrder(split, self.src_tok, self.tgt_tok, config)
    _assert_same_batches(self, _batches(skipped.stream(data.StreamPosition(1), skip=2), 3),
                         reference[per_epoch + 2:per_epoch + 5])

  def test_workers_read_disjoint_parts_that_cover_the_data(self):
    expected = sorted(_pairs(_batches(data.make_train_dataset(
        self.text, self.src_tok, self.tgt_tok, self._config()))))
    for name, shards in (("by_data", 1), ("by_file", 2)):
      sources, targets = self._files(name, shards=shards)
      split = data.open_text_shards(sources, targets)
      parts = []
      for worker in range(2):
        order = data.StreamOrder(split, self.src_tok, self.tgt_tok,
                                 self._config(shuffle_buffer=50), num_workers=2, worker=worker)
        self.assertEqual(order.by_data, shards == 1)
        parts.append(_pairs(_batches(order.epoch(0))))
      self.assertEqual(sorted(parts[0] + parts[1]), expected, name)
      self.assertBetween(len(parts[0]) / len(expected), 0.4, 0.6)
    empty = _write(os.path.join(self.get_temp_dir(), "empty.src"), [])
    split = data.open_text_shards([sources[0], empty], [targets[0], empty])
    with self.assertRaisesRegex(data.DataError, "Worker 1 of 2 has nothing to read"):
      data.StreamOrder(split, self.src_tok, self.tgt_tok, self._config(), num_workers=2,
                       worker=1)

  def test_an_epoch_without_batches_ends_the_stream(self):
    sources, targets = self._files("short")
    split = data.open_text_shards(sources, targets)
    order = data.StreamOrder(split, self.src_tok, self.tgt_tok,
                             self._config(max_source_len=1, max_target_len=1))
    self.assertEmpty(_batches(order.stream()))

  def test_files_corpus_streams_train_from_globs(self):
    sources, targets = self._files("glob", shards=3, gz=False)
    d = os.path.dirname(sources[0])
    corpus = data.load_corpus("files", train_src=os.path.join(d, "train.*.src"),
                              train_tgt=",".join(targets), valid_src=sources[0],
                              valid_tgt=targets[0])
    self.assertIsInstance(corpus["train"], data.ParallelShards)
    self.assertLen(corpus["train"].shards, 3)
    self.assertEqual(corpus["train"].sources, self.text.sources)
    self.assertIsInstance(corpus["valid"], data.ParallelText)
    with self.assertRaisesRegex(data.DataError, "matches no file"):
      data.load_corpus("files", train_src=os.path.join(d, "nope.*"), train_tgt=targets[0])
    with self.assertRaisesRegex(data.DataError, "Received 3 source and 1 target files"):
      data.load_corpus("files", train_src=os.path.join(d, "train.*.src"),
                       train_tgt=targets[0])


class VocabularySampleTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.text = data.generate_pairs(400, seed=3)

  def _split(self):
    d = self.get_temp_dir()
    src = _write(os.path.join(d, "s.src.gz"), self.text.sources, gz=True)
    tgt = _write(os.path.join(d, "s.tgt.gz"), self.text.targets, gz=True)
    return data.open_text_shards([src], [tgt])

  def test_sample_is_seeded_bounded_and_aligned(self):
    split = self._split()
    a = list(data.sample_pairs(split, 100, seed=1))
    b = list(data.sample_pairs(split, 100, seed=1))
    c = list(data.sample_pairs(split, 100, seed=2))
    self.assertEqual(a, b)
    self.assertNotEqual(a, c)
    self.assertLen(a, 100)
    pairs = list(zip(self.text.sources, self.text.targets))
    positions = [pairs.index(p) for p in a]
    self.assertEqual(positions, sorted(positions))  # corpus order, sides aligned
    self.assertEqual(list(data.sample_pairs(split, 1000)), pairs)  # all when it fits
    in_memory = data.sample_texts(self.text, 100, seed=1)
    self.assertLen(list(in_memory), 100)

  def test_tokenizers_from_the_sample_are_deterministic(self):
    split = self._split()
    config = data.TokenizerConfig(vocab_size=120, max_sentences=150, sample_seed=3)
    first = data.train_tokenizers(config, split)
    again = data.train_tokenizers(config, split)
    # pylint: disable=protected-access
    self.assertEqual(first[0]._proto, again[0]._proto)
    self.assertEqual(first[1]._proto, again[1]._proto)
    other = data.train_tokenizers(dataclasses.replace(config, sample_seed=4), split)
    self.assertNotEqual(first[1]._proto, other[1]._proto)
    # Word vocabularies: counted in the same single pass over the same sample.
    word = dataclasses.replace(config, kind="word", vocab_size=500)
    src, tgt = data.train_tokenizers(word, split)
    sample = list(data.sample_pairs(split, 150, seed=3))
    self.assertEqual(src.vocab, data.WordTokenizer.build([s for s, _ in sample], 500).vocab)
    self.assertEqual(tgt.vocab, data.WordTokenizer.build([t for _, t in sample], 500).vocab)


@pytest.mark.slow  # trains from the record files
class TfdsLocalDatasetTest(tf.test.TestCase):
  """A tiny translation dataset prepared in TFDS format in a temporary data_dir."""

  def test_train_is_streamed_from_the_record_files(self):
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    text = data.generate_pairs(120, seed=6)
    examples = [{"de": s, "en": t} for s, t in zip(text.sources, text.targets)]
    data_dir = self.get_temp_dir()
    tfds.dataset_builders.store_as_tfds_dataset(
        name="nmt_tf_tiny_translate", version="1.0.0", config="de-en",
        features=tfds.features.Translation(languages=["de", "en"]),
        split_datasets={"train": list(enumerate(examples)),
                        "validation": list(enumerate(examples[:10])),
                        "test": list(enumerate(examples[10:20]))},
        data_dir=data_dir, disable_shuffling=True,
        download_config=tfds.download.DownloadConfig(num_shards=3))
    corpus = data.load_corpus("tfds:nmt_tf_tiny_translate/de-en", data_dir=data_dir,
                              source_lang="en")
    train = corpus["train"]
    self.assertIsInstance(train, data.ParallelShards)
    self.assertLen(train.shards, 3)
    self.assertEqual(train.sources, text.targets)  # en is the source
    self.assertEqual(train.targets, text.sources)
    self.assertLen(list(corpus["valid"].as_numpy_iterator()), 10)
    src_tok = data.WordTokenizer.build(text.targets)
    tgt_tok = data.WordTokenizer.build(text.sources)
    config = data.PipelineConfig(max_source_len=30, max_target_len=30, batch_tokens=256,
                                 shuffle_buffer=25)
    order = data.StreamOrder(train, src_tok, tgt_tok, config)
    reference = _batches(order.stream(), 12)
    position = order.position(7)
    resumed = data.StreamOrder(train, src_tok, tgt_tok, config)
    _assert_same_batches(self, _batches(resumed.stream(position), 5), reference[7:])
    parts = [data.StreamOrder(train, src_tok, tgt_tok, config, num_workers=2, worker=w)
             for w in range(2)]
    self.assertEqual([p.by_data for p in parts], [False, False])
    self.assertEqual(sorted(_pairs(_batches(parts[0].epoch(0))) +
                            _pairs(_batches(parts[1].epoch(0)))),
                     sorted(_pairs(_batches(order.epoch(0)))))


if __name__ == "__main__":
  tf.test.main()
