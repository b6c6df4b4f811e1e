"""Subword regularization (data/subword_sampling.py): drawn segmentations of the training pairs,
in memory and streamed, the same for the same seed, and errors for what cannot sample."""

import gzip
import os
import time

import pytest
import tensorflow as tf

from nmt_tf import data
from nmt_tf import special_tokens
from nmt_tf.data import subword_sampling
from nmt_tf.experiment.config import ExperimentConfig
from nmt_tf.models.config import ConfigError
from nmt_tf.training import data_order
from tests.waits import SAFETY_NET

EOS, BOS = special_tokens.EOS_ID, special_tokens.BOS_ID
KEYS = ("source", "target_in", "target_out")


def _batches(dataset, count=None):
  dataset = dataset.take(count) if count is not None else dataset
  return [{k: v.tolist() for k, v in batch.items()} for batch in dataset.as_numpy_iterator()]


def _real(row):
  """A padded row's ids without the padding."""
  return [i for i in row if i != special_tokens.PAD_ID]


def _write(path, lines):
  with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in lines))
  return path


class SubwordSamplingTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.text = data.generate_pairs(300, seed=5)
    cls.src_tok = data.SentencePieceTokenizer.train(cls.text.sources, vocab_size=60)
    cls.tgt_tok = data.SentencePieceTokenizer.train(cls.text.targets, vocab_size=60)

  def _config(self, **kwargs):
    return data.PipelineConfig(**{"max_source_len": 1000, "max_target_len": 1000,
                                  "batch_tokens": 2000, "subword_alpha": 0.1, **kwargs})

  def _streamed(self, name):
    d = os.path.join(self.get_temp_dir(), name)
    os.makedirs(d, exist_ok=True)
    return data.open_text_shards([_write(os.path.join(d, "train.src.gz"), self.text.sources)],
                                 [_write(os.path.join(d, "train.tgt.gz"), self.text.targets)])

  def test_draws_are_segmentations_of_their_pairs(self):
    pairs = tf.data.Dataset.from_tensor_slices((self.text.sources, self.text.targets))
    drawn = list(subword_sampling.sampled_pairs(pairs, self.src_tok, self.tgt_tok, 0.1, -1,
                                                seed=3).as_numpy_iterator())
    self.assertLen(drawn, len(self.text))
    changed = 0
    for (source_ids, target_ids), source, target in zip(drawn, self.text.sources,
                                                        self.text.targets):
      self.assertEqual(self.src_tok.decode(source_ids.tolist()), source)
      self.assertEqual(self.tgt_tok.decode(target_ids.tolist()), target)
      changed += source_ids.tolist() != self.src_tok.encode(source)
    self.assertGreater(changed, len(self.text) // 2)  # alpha 0.1 over all segmentations
    # As tensors, for a stage of its own; no pair gives empty draws.
    source, target = subword_sampling.draw_all(pairs, self.src_tok, self.tgt_tok, 0.1, -1, 3)
    self.assertEqual(source.to_list(), [s.tolist() for s, _ in drawn])
    self.assertEqual(target.to_list(), [t.tolist() for _, t in drawn])
    for ids in subword_sampling.draw_all(pairs.take(0), self.src_tok, self.tgt_tok, 0.1, -1, 3):
      self.assertEqual(ids.shape[0], 0)

  def test_bpe_draws_by_dropout_of_merges(self):
    bpe = data.SentencePieceTokenizer.train(self.text.sources, vocab_size=80, model_type="bpe")
    drawn = bpe.sample(self.text.sources, 1, 0.1, 64)
    self.assertEqual(drawn, bpe.sample(self.text.sources, 1, 0.1, -1))  # nbest: no part
    self.assertEqual([bpe.decode(ids) for ids in drawn], self.text.sources)
    self.assertGreater(sum(map(len, drawn)),
                       sum(len(bpe.encode(s)) for s in self.text.sources))

  def test_batches_hold_the_model_inputs_of_drawn_pairs(self):
    batches = _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                               self._config()))
    sources, changed = set(), 0
    for batch in batches:
      for source, target_in, target_out in zip(*(batch[k] for k in KEYS)):
        source, target_in, target_out = _real(source), _real(target_in), _real(target_out)
        self.assertEqual(source[-1], EOS)
        self.assertEqual(target_in, [BOS] + target_out[:-1])
        self.assertEqual(target_out[-1], EOS)
        text = self.src_tok.decode(source[:-1])
        sources.add(text)
        changed += source[:-1] != self.src_tok.encode(text)
    self.assertEqual(sources, set(self.text.sources))
    self.assertGreater(changed, len(self.text) // 2)

  @pytest.mark.slow  # draws the corpus three times
  def test_seed_fixes_the_draw(self):
    first = _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                             self._config(seed=3)))
    again = _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                             self._config(seed=3)))
    self.assertEqual(first, again)
    pairs = tf.data.Dataset.from_tensor_slices((self.text.sources, self.text.targets))
    draws = [[tuple(map(tuple, p)) for p in subword_sampling.sampled_pairs(
        pairs, self.src_tok, self.tgt_tok, 0.1, -1, seed).as_numpy_iterator()]
             for seed in (3, 4)]
    self.assertNotEqual([d[0] for d in draws[0]], [d[0] for d in draws[1]])
    self.assertNotEqual([d[1] for d in draws[0]], [d[1] for d in draws[1]])
    # The source and target draws of one seed use different random streams.
    self.assertNotEqual(*subword_sampling.side_seeds(3))
    self.assertNotIn(subword_sampling.side_seeds(3)[1], subword_sampling.side_seeds(4))

  @pytest.mark.slow  # draws two epochs; the quick tier checks one seeded draw
  def test_restored_epoch_skips_to_the_same_batches(self):
    order = data_order.batch_order(self.text, self.src_tok, self.tgt_tok, self._config())
    whole = _batches(order.epoch(2))
    self.assertGreater(len(whole), 4)
    restored = data_order.batch_order(self.text, self.src_tok, self.tgt_tok, self._config())
    self.assertEqual(_batches(restored.epoch(2, skip=3)), whole[3:])
    self.assertNotEqual(_batches(order.epoch(3)), whole)

  @pytest.mark.slow  # streams, splits and resumes a corpus twice
  def test_streamed_split_draws_as_in_memory_and_resumes(self):
    split = self._streamed("one_piece")
    config = self._config(seed=4)
    in_memory = _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                                 config))
    streamed = data.StreamOrder(split, self.src_tok, self.tgt_tok, config)
    self.assertEqual(_batches(streamed.epoch(0)), in_memory)  # one piece: the same batches
    config = self._config(seed=4, shuffle_buffer=70)  # 5 pieces
    order = data.StreamOrder(split, self.src_tok, self.tgt_tok, config)
    reference = _batches(order.stream(), 12)
    _batches(order.stream(), 7)
    resumed = data.StreamOrder(split, self.src_tok, self.tgt_tok, config)
    self.assertEqual(_batches(resumed.stream(order.position(7)), 5), reference[7:])

  @pytest.mark.slow  # streams a corpus piece by piece
  def test_streamed_split_draws_the_next_piece_ahead(self):
    draws = []  # the seed of every draw of the source side

    class Recording(data.SentencePieceTokenizer):

      def sample(self, texts, seed, alpha, nbest=-1):
        draws.append(seed)
        return super().sample(texts, seed, alpha, nbest)

    source = Recording(self.src_tok._proto)  # pylint: disable=protected-access
    split = self._streamed("ahead")
    config = self._config(seed=4)  # one piece: epoch e draws under seed 4 + e
    order = data.StreamOrder(split, source, self.tgt_tok, config)
    batches = iter(order.stream())
    first = next(batches)
    seed = lambda e: subword_sampling.side_seeds(4 + e)[0]
    deadline = time.time() + SAFETY_NET
    while len(draws) < 2 and time.time() < deadline:
      time.sleep(0.05)
    # Epoch 1's draw is made while epoch 0 has batches left, and they are those drawn anew.
    self.assertEqual(draws[:2], [seed(0), seed(1)])
    self.assertEqual({k: v.numpy().tolist() for k, v in first.items()},
                     _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                                      config), 1)[0])

  def test_long_draws_are_filtered_at_the_limits(self):
    config = self._config(max_source_len=30, max_target_len=30, subword_alpha=0.01)
    for batch in data.make_train_dataset(self.text, self.src_tok, self.tgt_tok, config):
      lengths = tf.reduce_sum(tf.cast(batch["source"] > 0, tf.int32), axis=1) - 1
      self.assertLessEqual(int(tf.reduce_max(lengths)), 30)

  def test_what_cannot_sample_is_a_one_line_error(self):
    words = data.WordTokenizer.build(self.text.sources)
    with self.assertRaisesRegex(data.DataError, "SentencePiece tokenizers.*subword_alpha=0"):
      data.make_train_dataset(self.text, words, self.tgt_tok, self._config())
    with self.assertRaisesRegex(data.DataError, "SentencePiece tokenizers"):
      data_order.batch_order(self.text, self.src_tok, words, self._config())
    with self.assertRaisesRegex(data.DataError, "SentencePiece tokenizers"):
      data_order.batch_order(self._streamed("words"), words, self.tgt_tok, self._config())
    for bad in ({"subword_alpha": -0.1}, {"subword_alpha": "0.1"}, {"subword_nbest": 0},
                {"subword_nbest": 1}, {"subword_nbest": -2}, {"subword_nbest": 513}):
      with self.assertRaisesRegex(data.DataError, "subword_"):
        self._config(**bad)
    # The run's config refuses it with word vocabularies, before anything is built.
    with self.assertRaisesRegex(ConfigError, "subword_alpha=0.1 with tokenizer.kind='word'"):
      ExperimentConfig.from_dict({"tokenizer": {"kind": "word"},
                                  "pipeline": {"subword_alpha": 0.1}})
    self.assertEqual(ExperimentConfig.from_dict(
        {"pipeline": {"subword_alpha": 0.1, "subword_nbest": 64}}).pipeline.subword_nbest, 64)
    # Off: nothing is checked, word tokenizers batch as before.
    self.assertTrue(_batches(data.make_train_dataset(
        self.text, words, data.WordTokenizer.build(self.text.targets),
        self._config(subword_alpha=0))))


if __name__ == "__main__":
  tf.test.main()
